// Reads an HF tokenizer.json into the parts of a BPE tokenizer: the model, the added tokens and the
// per-id tables (bpe_load_steps.cpp reads the rest); every complaint names the file, the JSON key and what
// is supported.
#include <algorithm>
#include <cstdio>

#include "tokenizer/bpe_json.hpp"

namespace shardft::bpe {

namespace {

using TokenIds = std::unordered_map<std::string, std::int32_t>;

// model's options: type BPE, no dropout, byte fallback only without ByteLevel, no subword affixes.
void read_model_options(const Reader& rd, const json& model, BpeSpec& spec) {
  BpeModel& m = spec.model;
  const std::string mtype = model.contains("type") ? rd.type(model, "model.") : "BPE";
  if (mtype != "BPE") rd.unsupported("model.", mtype, "\"BPE\"");
  const json& dropout = rd.at(model, "dropout");
  if (!dropout.is_null() && !(dropout.is_number() && dropout.get<double>() == 0.0)) {
    rd.fail("model.dropout", shown(dropout) + " is not supported (expected null: BPE dropout is for training)");
  }
  m.byte_fallback = rd.boolean(model, "model.", "byte_fallback", false);
  if (m.byte_fallback && spec.byte_level) {
    rd.fail("model.byte_fallback",
            "true is not supported with the ByteLevel pre-tokenizer or decoder (expected false; byte fallback is for "
            "SentencePiece-style BPE: a Metaspace pre-tokenizer or none, no ByteLevel)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json& j = rd.at(model, key);
    if (!j.is_null() && !(j.is_string() && j.get<std::string>().empty())) {
      rd.fail(std::string("model.") + key, shown(j) + " is not supported (expected null)");
    }
  }
  m.ignore_merges = rd.boolean(model, "model.", "ignore_merges", false);
  m.fuse_unk = rd.boolean(model, "model.", "fuse_unk", false);
}

// model.vocab (token -> id) and model.unk_token.
TokenIds read_vocab(const Reader& rd, const json& model, BpeModel& m) {
  const json& vocab = rd.object(model, "model.", "vocab", "an object of token -> id");
  std::unordered_map<std::string, std::int32_t> token_ids;
  token_ids.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const json& v = it.value();
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 0x7fffffff) {
      rd.fail("model.vocab[" + json(it.key()).dump() + "]", "is " + shown(v) + " (expected an id >= 0)");
    }
    const auto id = static_cast<std::int32_t>(v.get<std::int64_t>());
    token_ids[it.key()] = id;
  }
  const json& unk = rd.at(model, "unk_token");
  if (!unk.is_null()) {
    if (!unk.is_string()) rd.fail("model.unk_token", "is " + kind_of(unk) + " (expected null or a token)");
    const auto it = token_ids.find(unk.get<std::string>());
    if (it == token_ids.end()) rd.fail("model.unk_token", shown(unk) + " is not in model.vocab");
    m.unk_id = it->second;
  }
  return token_ids;
}

// model.merges, "left right" or ["left", "right"], each part and the merged token in the vocabulary.
void read_merges(const Reader& rd, const json& model, const TokenIds& token_ids, BpeModel& m) {
  const json& merges = rd.at(model, "merges");
  if (merges.is_null()) rd.fail("model.merges", "is missing (expected a list of merges)");
  if (!merges.is_array()) rd.fail("model.merges", "is " + kind_of(merges) + " (expected a list of merges)");
  m.merges.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const json& merge = merges[i];
    const std::string key = "model.merges[" + std::to_string(i) + "]";
    std::string a, b;
    if (merge.is_string()) {  // "a b"
      const std::string s = merge.get<std::string>();
      const std::size_t sp = s.find(' ');
      if (sp == std::string::npos) rd.fail(key, shown(merge) + " is not a merge (expected \"left right\")");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {  // ["a", "b"]
      a = merge[0].get<std::string>();
      b = merge[1].get<std::string>();
    } else {
      rd.fail(key, "is " + shown(merge) + " (expected \"left right\" or [\"left\", \"right\"])");
    }
    const auto ia = token_ids.find(a), ib = token_ids.find(b), im = token_ids.find(a + b);
    if (ia == token_ids.end()) rd.fail(key, json(a).dump() + " is not in model.vocab");
    if (ib == token_ids.end()) rd.fail(key, json(b).dump() + " is not in model.vocab");
    if (im == token_ids.end()) rd.fail(key, "merged token " + json(a + b).dump() + " is not in model.vocab");
    m.merges.insert(ia->second, ib->second, static_cast<std::uint32_t>(i), im->second);
  }
}

// The per-symbol id tables: bytes under ByteLevel; else single characters and the <0xNN> fallback tokens.
void build_symbol_tables(const TokenIds& token_ids, bool byte_level, BpeModel& m) {
  if (byte_level) {
    std::string bytes;
    for (int b = 0; b < 256; ++b) {
      std::string ch;
      append_utf8(byte_to_char(static_cast<unsigned char>(b)), ch);
      const auto it = token_ids.find(ch);
      m.byte_id[b] = it == token_ids.end() ? -1 : it->second;
    }
    if (m.ignore_merges) {
      for (const auto& [tok, id] : token_ids) {
        if (byte_level_bytes(tok, bytes)) m.word_ids.emplace(bytes, id);
      }
    }
  } else {
    m.ascii_id.fill(-1);
    for (const auto& [tok, id] : token_ids) {
      std::size_t i = 0;
      const char32_t c = tok.empty() ? 0 : next_code_point(tok, i);
      if (tok.empty() || i != tok.size()) continue;  // one character only
      if (c < 128) {
        m.ascii_id[c] = id;
      } else {
        m.char_id[c] = id;
      }
    }
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);  // how HF spells them (Rust's {:#04X})
      const auto it = token_ids.find(name);
      m.fallback_id[b] = it == token_ids.end() ? -1 : it->second;
    }
    if (m.ignore_merges) m.word_ids = token_ids;
  }
}

// added_tokens, each id checked against the one HF's AddedVocabulary gives it.
void read_added_tokens(const Reader& rd, const json& doc, const TokenIds& token_ids, BpeSpec& spec) {
  const json& added = rd.at(doc, "added_tokens");
  if (!added.is_null() && !added.is_array()) rd.fail("added_tokens", "is " + kind_of(added) + " (expected a list)");
  std::unordered_map<std::string, std::int32_t> hf_ids;  // content -> id, as HF's AddedVocabulary numbers them
  std::int32_t max_hf_id = -1;
  const auto next_id = [&] {
    const auto vocab_n = static_cast<std::int32_t>(token_ids.size());
    return max_hf_id < 0 ? vocab_n : (max_hf_id >= vocab_n || vocab_n == 0 ? max_hf_id + 1 : vocab_n);
  };
  if (added.is_array()) {
    for (std::size_t i = 0; i < added.size(); ++i) {
      const std::string path = "added_tokens[" + std::to_string(i) + "].";
      const json& a = added[i];
      if (!a.is_object()) rd.fail(key_of(path), "is " + kind_of(a) + " (expected an object)");
      const json& id = rd.at(a, "id");
      const json& content = rd.at(a, "content");
      if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > 0x7fffffff) {
        rd.fail(path + "id", "is " + shown(id) + " (expected an id >= 0)");
      }
      if (!content.is_string() || content.get<std::string>().empty()) {
        rd.fail(path + "content", "is " + shown(content) + " (expected a non-empty string)");
      }
      AddedToken t;
      t.content = content.get<std::string>();
      t.id = static_cast<std::int32_t>(id.get<std::int64_t>());
      t.special = rd.boolean(a, path, "special", false);
      t.lstrip = rd.boolean(a, path, "lstrip", false);
      t.rstrip = rd.boolean(a, path, "rstrip", false);
      t.single_word = rd.boolean(a, path, "single_word", false);
      t.normalized = rd.boolean(a, path, "normalized", true);
      // HF does not take the id from the file: it gives the token its vocab id, or the next id after the
      // vocabulary (only warning when that differs). A file whose ids disagree would encode differently.
      const auto known = hf_ids.find(t.content);
      std::int32_t hf_id = known != hf_ids.end() ? known->second : -1;
      if (hf_id < 0) {
        const auto in_vocab = token_ids.find(t.content);
        hf_id = in_vocab != token_ids.end() ? in_vocab->second : next_id();
      }
      if (hf_id != t.id) {
        rd.fail(path + "id", "is " + std::to_string(t.id) + " but HF gives " + shown(content) + " id " +
                                 std::to_string(hf_id) + " (its model.vocab id, else the next id after model.vocab's " +
                                 std::to_string(token_ids.size()) + " entries and the added tokens before it)");
      }
      hf_ids[t.content] = hf_id;
      max_hf_id = std::max(max_hf_id, hf_id);
      spec.added.push_back(std::move(t));
    }
  }
}

// SentencePiece style: the word-break character where every token holds it only as a prefix and every
// character can be encoded (unk or a complete byte fallback).
void find_word_break(const TokenIds& token_ids, BpeSpec& spec) {
  const BpeModel& m = spec.model;
  if (!spec.byte_level && !m.ignore_merges) {
    const std::string c = spec.has_metaspace ? spec.metaspace.replacement : "\xe2\x96\x81";
    bool ok = token_ids.count(c) > 0 &&
              (m.unk_id >= 0 ||
               (m.byte_fallback && std::find(m.fallback_id.begin(), m.fallback_id.end(), -1) == m.fallback_id.end()));
    for (auto it = token_ids.begin(); ok && it != token_ids.end(); ++it) {
      const std::string& t = it->first;
      for (std::size_t at = t.find(c, 1); ok && at != std::string::npos; at = t.find(c, at + c.size())) {
        ok = at >= c.size() && t.compare(at - c.size(), c.size(), c) == 0;
      }
    }
    if (ok) spec.word_break = c;
  }
}

// The per-id tables for decode, with what the decoder does to each token alone done once, here.
void build_decode_tables(const TokenIds& token_ids, BpeSpec& spec) {
  std::int32_t max_id = -1;
  for (const auto& [tok, id] : token_ids) max_id = std::max(max_id, id);
  for (const AddedToken& t : spec.added) max_id = std::max(max_id, t.id);
  spec.vocab_size = max_id + 1;
  spec.decode_bytes.assign(spec.vocab_size, std::string());
  spec.id_kind.assign(spec.vocab_size, 0);
  for (const auto& [tok, id] : token_ids) {
    spec.decode_bytes[id] = tok;
    spec.id_kind[id] = 1;
  }
  for (const AddedToken& t : spec.added) {  // added tokens take precedence, as in HF's decode
    spec.decode_bytes[t.id] = t.content;
    spec.id_kind[t.id] = t.special ? 2 : 1;
  }
  // What the decoder does to each token alone is done once, here.
  std::size_t per_token = 0;
  while (per_token < spec.decoder.size() && spec.decoder[per_token].per_token()) ++per_token;
  for (std::string& text : spec.decode_bytes) {
    if (spec.byte_level) {
      text = byte_level_decode(text);
    } else {
      for (std::size_t k = 0; k < per_token; ++k) text = decode_token(spec.decoder[k], std::move(text));
    }
  }
  spec.decoder.erase(spec.decoder.begin(), spec.decoder.begin() + static_cast<std::ptrdiff_t>(per_token));
}

}  // namespace

BpeSpec read_bpe_spec(const std::string& file, const std::string& content) {
  json doc;
  try {
    doc = json::parse(content);
  } catch (const json::exception& e) {
    throw DataError(file + ": not valid JSON (" + e.what() + ")");
  }
  const Reader rd{file};
  BpeSpec spec;
  if (!doc.is_object()) rd.fail("(top level)", "is " + kind_of(doc) + " (expected a tokenizer.json object)");
  read_pipeline(rd, doc, spec);
  spec.model.byte_level = spec.byte_level;
  const json& model = rd.object(doc, "", "model", "an object with \"type\": \"BPE\"");
  read_model_options(rd, model, spec);
  const TokenIds token_ids = read_vocab(rd, model, spec.model);
  read_merges(rd, model, token_ids, spec.model);
  build_symbol_tables(token_ids, spec.byte_level, spec.model);
  read_added_tokens(rd, doc, token_ids, spec);
  find_word_break(token_ids, spec);
  build_decode_tables(token_ids, spec);
  return spec;
}

}  // namespace shardft::bpe
