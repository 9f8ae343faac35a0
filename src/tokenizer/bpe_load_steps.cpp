// Reads the steps around the BPE model in a tokenizer.json: normalizer, pre-tokenizer, decoder and
// post-processor. Two families are supported: byte-level (a ByteLevel pre-tokenizer and decoder: GPT-2,
// Llama 3, Qwen2) and SentencePiece style (Unicode characters with byte fallback, Metaspace or a
// Prepend / Replace normalizer, a Replace / ByteFallback / Fuse / Strip or Metaspace decoder: Llama 2,
// Mistral, TinyLlama, Phi-3).
#include "tokenizer/bpe_json.hpp"

namespace shardft::bpe {
namespace {

using Steps = std::vector<std::pair<const json*, std::string>>;

const char* const kNormalizers = "null, \"NFC\", \"Prepend\", \"Replace\" (a String pattern) or a \"Sequence\" of them";
const char* const kByteLevelPre = "\"ByteLevel\", or a \"Sequence\" of \"Split\" steps ending in \"ByteLevel\"";
const char* const kCharPre =
    "null, \"Metaspace\", or a \"Sequence\" of \"Split\" steps, the last may be \"Metaspace\" (SentencePiece-style "
    "BPE); or \"ByteLevel\" (byte-level BPE)";
const char* const kCharDecoders =
    "null, \"Replace\" (a String pattern), \"ByteFallback\", \"Fuse\", \"Strip\", \"Metaspace\" or a \"Sequence\" "
    "of them (SentencePiece-style BPE); or \"ByteLevel\" (byte-level BPE)";

Steps steps_of(const Reader& rd, const json& j, const char* path, const char* list_key) {
  Steps steps;
  if (!j.is_null()) rd.flatten(j, path, list_key, steps);
  return steps;
}

bool has_byte_level(const Reader& rd, const Steps& steps) {
  for (const auto& [step, path] : steps) {
    if (rd.type(*step, path) == "ByteLevel") return true;
  }
  return false;
}

std::string string_of(const Reader& rd, const json& obj, const std::string& path, const char* key) {
  const json& j = Reader::at(obj, key);
  if (!j.is_string()) rd.fail(path + key, j.is_null() ? "is missing (expected a string)" : "is " + kind_of(j));
  return j.get<std::string>();
}

std::string one_char(const Reader& rd, const json& obj, const std::string& path, const char* key) {
  const std::string s = string_of(rd, obj, path, key);
  std::size_t i = 0;
  if (s.empty() || (next_code_point(s, i), i != s.size())) {
    rd.fail(path + key, shown(obj.at(key)) + " is not one character (expected one, such as \"\xe2\x96\x81\")");
  }
  return s;
}

std::size_t count_of(const Reader& rd, const json& obj, const std::string& path, const char* key) {
  const json& j = Reader::at(obj, key);
  if (!j.is_number_unsigned() && !(j.is_number_integer() && j.get<std::int64_t>() >= 0))
    rd.fail(path + key, "is " + shown(j) + " (expected a count >= 0)");
  return static_cast<std::size_t>(j.get<std::uint64_t>());
}

// Replace's pattern: {"String": s} with s not empty.
std::string literal_pattern(const Reader& rd, const json& step, const std::string& path) {
  const json& pattern = rd.object(step, path, "pattern", "{\"String\": ...}");
  const json& s = Reader::at(pattern, "String");
  if (!s.is_string() || s.get<std::string>().empty()) {
    rd.fail(path + "pattern", shown(pattern) + " is not supported (expected {\"String\": ...}, not empty)");
  }
  return s.get<std::string>();
}

// Metaspace's prepend_scheme, with the older add_prefix_space read as HF reads it.
MetaspaceSpec::Prepend prepend_scheme(const Reader& rd, const json& step, const std::string& path) {
  const json& scheme = Reader::at(step, "prepend_scheme");
  MetaspaceSpec::Prepend p = MetaspaceSpec::Prepend::always;
  if (!scheme.is_null()) {
    const std::string s = scheme.is_string() ? scheme.get<std::string>() : "";
    if (s == "first") {
      p = MetaspaceSpec::Prepend::first;
    } else if (s == "never") {
      p = MetaspaceSpec::Prepend::never;
    } else if (s != "always") {
      rd.fail(path + "prepend_scheme",
              shown(scheme) + " is not supported (expected \"always\", \"first\" or \"never\")");
    }
  }
  if (!rd.boolean(step, path, "add_prefix_space", true)) {
    if (p != MetaspaceSpec::Prepend::never) {
      rd.fail(path + "add_prefix_space", "false does not match prepend_scheme (HF refuses this too)");
    }
  }
  return p;
}

void read_normalizer(const Reader& rd, const json& doc, BpeSpec& spec) {
  for (const auto& [step, path] : steps_of(rd, Reader::at(doc, "normalizer"), "normalizer.", "normalizers")) {
    const std::string t = rd.type(*step, path);
    NormalizerStep n;
    if (t == "NFC") {
      n.kind = NormalizerStep::Kind::nfc;
    } else if (t == "Prepend") {
      n.kind = NormalizerStep::Kind::prepend;
      n.content = string_of(rd, *step, path, "prepend");
      if (n.content.empty()) continue;
    } else if (t == "Replace") {
      n.kind = NormalizerStep::Kind::replace;
      n.pattern = literal_pattern(rd, *step, path);
      n.content = string_of(rd, *step, path, "content");
    } else {
      rd.unsupported(path, t, kNormalizers);
    }
    spec.normalizer.push_back(std::move(n));
  }
}

void add_split(const Reader& rd, const json& step, const std::string& path, BpeSpec& spec) {
  const json& pattern = rd.object(step, path, "pattern", "{\"Regex\": ...} or {\"String\": ...}");
  const bool literal = pattern.contains("String");
  const json& p = literal ? pattern["String"] : Reader::at(pattern, "Regex");
  if (!p.is_string())
    rd.fail(path + "pattern", "is " + shown(pattern) + " (expected {\"Regex\": ...} or {\"String\": ...})");
  const json& behavior = Reader::at(step, "behavior");
  if (!(behavior.is_string() && behavior.get<std::string>() == "Isolated")) {
    rd.fail(path + "behavior", shown(behavior) + " is not supported (expected \"Isolated\")");
  }
  if (rd.boolean(step, path, "invert", false)) rd.fail(path + "invert", "true is not supported (expected false)");
  try {
    spec.splits.push_back(std::make_unique<Regex>(p.get<std::string>(), literal));
  } catch (const std::invalid_argument& e) {
    rd.fail(path + "pattern." + (literal ? "String" : "Regex"), "does not compile: " + std::string(e.what()));
  }
}

// Split steps, then ByteLevel.
void read_byte_level_pre(const Reader& rd, const json& pre, BpeSpec& spec) {
  if (pre.is_null()) rd.fail("pre_tokenizer", std::string("is null (expected ") + kByteLevelPre + ")");
  const Steps steps = steps_of(rd, pre, "pre_tokenizer.", "pretokenizers");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const json& step = *steps[i].first;
    const std::string& path = steps[i].second;
    const std::string t = rd.type(step, path);
    const bool last = i + 1 == steps.size();
    if (t == "ByteLevel") {
      if (!last) rd.fail(key_of(path), "is ByteLevel but not the last step (expected ByteLevel last)");
      spec.prefix_space = rd.boolean(step, path, "add_prefix_space", true);
      if (rd.boolean(step, path, "use_regex", true)) {
        spec.byte_level_regex = std::make_unique<Regex>(
            R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", false);
      }
    } else if (t == "Split") {
      if (last) rd.fail(key_of(path), std::string("is the last step (expected ") + kByteLevelPre + ")");
      add_split(rd, step, path, spec);
    } else {
      rd.unsupported(path, t, last ? kByteLevelPre : "\"Split\" or \"ByteLevel\"");
    }
  }
}

// Split steps, then Metaspace or nothing.
void read_char_pre(const Reader& rd, const json& pre, BpeSpec& spec) {
  const Steps steps = steps_of(rd, pre, "pre_tokenizer.", "pretokenizers");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const json& step = *steps[i].first;
    const std::string& path = steps[i].second;
    const std::string t = rd.type(step, path);
    if (t == "Metaspace") {
      if (i + 1 != steps.size()) rd.fail(key_of(path), "is Metaspace but not the last step (expected it last)");
      spec.has_metaspace = true;
      spec.metaspace.replacement = one_char(rd, step, path, "replacement");
      spec.metaspace.prepend = prepend_scheme(rd, step, path);
      spec.metaspace.split = rd.boolean(step, path, "split", true);
    } else if (t == "Split") {
      add_split(rd, step, path, spec);
    } else {
      rd.unsupported(path, t, kCharPre);
    }
  }
}

void read_byte_level_decoder(const Reader& rd, const Steps& steps) {
  if (steps.empty()) rd.fail("decoder", "is null (expected \"ByteLevel\")");
  for (const auto& [step, path] : steps) {
    const std::string t = rd.type(*step, path);
    if (t != "ByteLevel") rd.unsupported(path, t, "\"ByteLevel\"");
  }
  if (steps.size() != 1) rd.fail("decoder", "has " + std::to_string(steps.size()) + " steps (expected one ByteLevel)");
}

void read_char_decoder(const Reader& rd, const json& dec, const Steps& steps, BpeSpec& spec) {
  spec.no_decoder = dec.is_null();
  for (const auto& [step, path] : steps) {
    const std::string t = rd.type(*step, path);
    DecoderStep d;
    if (t == "Replace") {
      d.kind = DecoderStep::Kind::replace;
      d.pattern = literal_pattern(rd, *step, path);
      d.content = string_of(rd, *step, path, "content");
    } else if (t == "ByteFallback") {
      d.kind = DecoderStep::Kind::byte_fallback;
    } else if (t == "Fuse") {
      d.kind = DecoderStep::Kind::fuse;
    } else if (t == "Strip") {
      d.kind = DecoderStep::Kind::strip;
      const std::string c = one_char(rd, *step, path, "content");
      std::size_t i = 0;
      d.strip_char = next_code_point(c, i);
      d.strip_start = count_of(rd, *step, path, "start");
      d.strip_stop = count_of(rd, *step, path, "stop");
    } else if (t == "Metaspace") {
      d.kind = DecoderStep::Kind::metaspace;
      d.content = one_char(rd, *step, path, "replacement");
      d.metaspace_prepend = prepend_scheme(rd, *step, path) != MetaspaceSpec::Prepend::never;
    } else {
      rd.unsupported(path, t, kCharDecoders);
    }
    spec.decoder.push_back(std::move(d));
  }
}

// Accepted and never applied: encode adds nothing around the text (the chat template adds BOS itself).
void read_post_processor(const Reader& rd, const json& doc) {
  for (const auto& [step, path] : steps_of(rd, Reader::at(doc, "post_processor"), "post_processor.", "processors")) {
    const std::string t = rd.type(*step, path);
    if (t != "ByteLevel" && t != "TemplateProcessing" && t != "RobertaProcessing" && t != "BertProcessing") {
      rd.unsupported(path, t,
                     "null, \"ByteLevel\", \"TemplateProcessing\", \"RobertaProcessing\", \"BertProcessing\" or a "
                     "\"Sequence\" of them");
    }
  }
}

}  // namespace

void read_pipeline(const Reader& rd, const json& doc, BpeSpec& spec) {
  const json& pre = Reader::at(doc, "pre_tokenizer");
  const json& dec = Reader::at(doc, "decoder");
  const Steps dec_steps = steps_of(rd, dec, "decoder.", "decoders");
  spec.byte_level =
      has_byte_level(rd, steps_of(rd, pre, "pre_tokenizer.", "pretokenizers")) || has_byte_level(rd, dec_steps);
  read_normalizer(rd, doc, spec);
  if (spec.byte_level) {
    read_byte_level_pre(rd, pre, spec);
    read_byte_level_decoder(rd, dec_steps);
  } else {
    read_char_pre(rd, pre, spec);
    read_char_decoder(rd, dec, dec_steps, spec);
  }
  read_post_processor(rd, doc);
}

}  // namespace shardft::bpe
