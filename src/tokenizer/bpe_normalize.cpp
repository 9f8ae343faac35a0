// The normalizers HF tokenizer.json files use (NFC; Prepend and Replace, as Llama 2 and Mistral do) and
// the Metaspace pre-tokenizer, each keeping a map from its output back to its input so that token spans
// point into the original text.
#include <cstring>

#include "tokenizer/bpe_internal.hpp"

namespace shardft::bpe {
namespace {

// out = prefix + in.
void prepend(std::string_view prefix, std::string_view in, std::string& out, std::vector<std::uint32_t>& map) {
  out.assign(prefix.data(), prefix.size());
  out.append(in.data(), in.size());
  map.assign(prefix.size(), 0);  // inserted text covers nothing: it sits where the input begins
  for (std::size_t k = 0; k <= in.size(); ++k) map.push_back(static_cast<std::uint32_t>(k));
}

// Every occurrence of `pattern` (non-overlapping, leftmost first) replaced by `content`, the way HF's
// Replace with a String pattern does. False when there is none.
bool replace(std::string_view pattern, std::string_view content, std::string_view in, std::string& out,
             std::vector<std::uint32_t>& map) {
  std::size_t hit = in.find(pattern);
  if (hit == std::string_view::npos) return false;
  out.clear();
  map.clear();
  std::size_t at = 0;
  while (true) {
    const std::size_t stop = hit == std::string_view::npos ? in.size() : hit;
    out.append(in.data() + at, stop - at);
    for (std::size_t k = at; k < stop; ++k) map.push_back(static_cast<std::uint32_t>(k));
    if (hit == std::string_view::npos) break;
    out.append(content.data(), content.size());
    for (std::size_t k = 0; k < content.size(); ++k)
      map.push_back(static_cast<std::uint32_t>(k == 0 ? hit : hit + pattern.size()));
    at = hit + pattern.size();
    hit = in.find(pattern, at);
  }
  map.push_back(static_cast<std::uint32_t>(in.size()));
  return true;
}

// One step; `hf` (when given) receives its HF alignment: nfc()'s, or for the other steps their map.
bool apply(const NormalizerStep& step, std::string_view in, std::string& out, std::vector<std::uint32_t>& map,
           Alignment* hf) {
  bool changed = false;
  switch (step.kind) {
    case NormalizerStep::Kind::nfc:
      return nfc(in, out, map, hf);
    case NormalizerStep::Kind::prepend:
      if (in.empty()) return false;  // HF prepends to non-empty text only
      prepend(step.content, in, out, map);
      changed = true;
      break;
    case NormalizerStep::Kind::replace:
      changed = replace(step.pattern, step.content, in, out, map);
      break;
  }
  if (changed && hf) hf->begin = hf->end = map;
  return changed;
}

}  // namespace

bool normalize(const std::vector<NormalizerStep>& steps, std::string_view in, std::string& out,
               std::vector<std::uint32_t>& map, NormalizeScratch& scratch, Alignment* hf) {
  bool changed = false;
  for (const NormalizerStep& step : steps) {
    const std::string_view cur = changed ? std::string_view(out) : in;
    if (!apply(step, cur, scratch.text, scratch.map, hf ? &scratch.hf : nullptr)) continue;
    if (changed) {
      for (std::uint32_t& m : scratch.map) m = map[m];  // through the earlier steps' map, back to `in`
      if (hf) {  // each end of the alignment through the earlier steps' same end
        for (std::uint32_t& m : scratch.hf.begin) m = hf->begin[m];
        for (std::uint32_t& m : scratch.hf.end) m = hf->end[m];
      }
    }
    out.swap(scratch.text);
    map.swap(scratch.map);
    if (hf) {
      hf->begin.swap(scratch.hf.begin);
      hf->end.swap(scratch.hf.end);
    }
    changed = true;
  }
  return changed;
}

void metaspace(const MetaspaceSpec& spec, std::string_view piece, bool starts_input, std::size_t base, std::string& out,
               std::vector<std::uint32_t>& map, std::vector<std::size_t>& word_ends) {
  const std::string& rep = spec.replacement;
  out.clear();
  map.clear();
  word_ends.clear();
  // The replacement is prepended when the piece does not start with it once its spaces are replaced.
  const bool starts_with_rep =
      (!piece.empty() && piece[0] == ' ') || piece.substr(0, rep.size()) == std::string_view(rep);
  const bool prepend = !piece.empty() && !starts_with_rep &&
                       (spec.prepend == MetaspaceSpec::Prepend::always ||
                        (spec.prepend == MetaspaceSpec::Prepend::first && starts_input));
  if (prepend) {
    out += rep;
    map.insert(map.end(), rep.size(), static_cast<std::uint32_t>(base));
  }
  for (std::size_t k = 0; k < piece.size(); ++k) {
    if (piece[k] == ' ') {
      out += rep;
      map.push_back(static_cast<std::uint32_t>(base + k));
      map.insert(map.end(), rep.size() - 1, static_cast<std::uint32_t>(base + k + 1));
    } else {
      out += piece[k];
      map.push_back(static_cast<std::uint32_t>(base + k));
    }
  }
  map.push_back(static_cast<std::uint32_t>(base + piece.size()));
  if (out.empty()) return;
  if (!spec.split) {
    word_ends.push_back(out.size());
    return;
  }
  // Each replacement starts a word (HF's split with MergedWithNext); empty words are left out.
  const std::string_view text(out);
  std::size_t at = text.find(rep, 1);
  while (at != std::string_view::npos) {
    word_ends.push_back(at);
    at = text.find(rep, at + rep.size());
  }
  word_ends.push_back(out.size());
}

}  // namespace shardft::bpe
