// Reads an HF tokenizer.json into the parts of a byte-level BPE tokenizer; every complaint names the
// file, the JSON key and what is supported.
#include <nlohmann/json.hpp>

#include "data/bpe_internal.hpp"
#include "data/sft_data.hpp"

namespace shardft::bpe {
namespace {

using json = nlohmann::json;

std::string kind_of(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "a list";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    default:
      return "a number";
  }
}

std::string shown(const json& j) {
  std::string s = j.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// Reads one tokenizer.json, every complaint naming the file and the key.
struct Reader {
  std::string file;
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw DataError(file + ": " + key + " " + what);
  }
  static const json& at(const json& obj, const char* key) {
    static const json null_value;
    const auto it = obj.find(key);
    return it == obj.end() ? null_value : *it;
  }
  const json& object(const json& obj, const std::string& path, const char* key, const std::string& expected) const {
    const json& j = at(obj, key);
    if (j.is_null()) fail(path + key, "is missing (expected " + expected + ")");
    if (!j.is_object()) fail(path + key, "is " + kind_of(j) + " (expected " + expected + ")");
    return j;
  }
  bool boolean(const json& obj, const std::string& path, const char* key, bool fallback) const {
    const json& j = at(obj, key);
    if (j.is_null()) return fallback;
    if (!j.is_boolean()) fail(path + key, "is " + kind_of(j) + " (expected true or false)");
    return j.get<bool>();
  }
  std::string type(const json& obj, const std::string& path) const {
    if (!obj.is_object())
      fail(path.empty() ? "(top level)" : path.substr(0, path.size() - 1),
           "is " + kind_of(obj) + " (expected an object with a \"type\")");
    const json& t = at(obj, "type");
    if (!t.is_string()) fail(path + "type", t.is_null() ? "is missing" : "is " + kind_of(t) + " (expected a string)");
    return t.get<std::string>();
  }
  [[noreturn]] void unsupported(const std::string& path, const std::string& type, const std::string& expected) const {
    fail(path + "type", "\"" + type + "\" is not supported (expected " + expected + ")");
  }
  // Flattens nested "Sequence"s: the steps with their key paths.
  void flatten(const json& j, const std::string& path, const char* list_key,
               std::vector<std::pair<const json*, std::string>>& steps) const {
    if (type(j, path) != "Sequence") {
      steps.emplace_back(&j, path);
      return;
    }
    const json& list = at(j, list_key);
    if (!list.is_array()) fail(path + list_key, "is " + kind_of(list) + " (expected a list)");
    for (std::size_t i = 0; i < list.size(); ++i) {
      flatten(list[i], path + list_key + "[" + std::to_string(i) + "].", list_key, steps);
    }
  }
};

std::string key_of(const std::string& path) { return path.empty() ? path : path.substr(0, path.size() - 1); }

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

  // -- model --
  const json& model = rd.object(doc, "", "model", "an object with \"type\": \"BPE\"");
  const std::string mtype = model.contains("type") ? rd.type(model, "model.") : "BPE";
  if (mtype != "BPE") rd.unsupported("model.", mtype, "\"BPE\"");
  const json& dropout = rd.at(model, "dropout");
  if (!dropout.is_null() && !(dropout.is_number() && dropout.get<double>() == 0.0)) {
    rd.fail("model.dropout", shown(dropout) + " is not supported (expected null: BPE dropout is for training)");
  }
  if (rd.boolean(model, "model.", "byte_fallback", false)) {
    rd.fail("model.byte_fallback",
            "true is not supported (expected false: byte-level BPE only; SentencePiece-style BPE as in Llama 2 or "
            "Mistral is not supported)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json& j = rd.at(model, key);
    if (!j.is_null() && !(j.is_string() && j.get<std::string>().empty())) {
      rd.fail(std::string("model.") + key, shown(j) + " is not supported (expected null)");
    }
  }
  spec.model.ignore_merges = rd.boolean(model, "model.", "ignore_merges", false);
  spec.model.fuse_unk = rd.boolean(model, "model.", "fuse_unk", false);

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
    spec.model.unk_id = it->second;
  }

  const json& merges = rd.at(model, "merges");
  if (merges.is_null()) rd.fail("model.merges", "is missing (expected a list of merges)");
  if (!merges.is_array()) rd.fail("model.merges", "is " + kind_of(merges) + " (expected a list of merges)");
  spec.model.merges.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    const std::string key = "model.merges[" + std::to_string(i) + "]";
    std::string a, b;
    if (m.is_string()) {  // "a b"
      const std::string s = m.get<std::string>();
      const std::size_t sp = s.find(' ');
      if (sp == std::string::npos) rd.fail(key, shown(m) + " is not a merge (expected \"left right\")");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {  // ["a", "b"]
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      rd.fail(key, "is " + shown(m) + " (expected \"left right\" or [\"left\", \"right\"])");
    }
    const auto ia = token_ids.find(a), ib = token_ids.find(b), im = token_ids.find(a + b);
    if (ia == token_ids.end()) rd.fail(key, json(a).dump() + " is not in model.vocab");
    if (ib == token_ids.end()) rd.fail(key, json(b).dump() + " is not in model.vocab");
    if (im == token_ids.end()) rd.fail(key, "merged token " + json(a + b).dump() + " is not in model.vocab");
    spec.model.merges.insert(ia->second, ib->second, static_cast<std::uint32_t>(i), im->second);
  }

  std::string bytes;
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    bpe::append_utf8(bpe::byte_to_char(static_cast<unsigned char>(b)), ch);
    const auto it = token_ids.find(ch);
    spec.model.byte_id[b] = it == token_ids.end() ? -1 : it->second;
  }
  if (spec.model.ignore_merges) {
    for (const auto& [tok, id] : token_ids) {
      if (bpe::byte_level_bytes(tok, bytes)) spec.model.word_ids.emplace(bytes, id);
    }
  }

  // -- normalizer --
  const json& norm = rd.at(doc, "normalizer");
  if (!norm.is_null()) {
    std::vector<std::pair<const json*, std::string>> steps;
    rd.flatten(norm, "normalizer.", "normalizers", steps);
    for (const auto& [step, path] : steps) {
      const std::string t = rd.type(*step, path);
      if (t != "NFC") rd.unsupported(path, t, "null, \"NFC\" or a \"Sequence\" of \"NFC\"");
      spec.nfc = true;
    }
  }

  // -- added tokens --
  const json& added = rd.at(doc, "added_tokens");
  if (!added.is_null() && !added.is_array()) rd.fail("added_tokens", "is " + kind_of(added) + " (expected a list)");
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
      spec.added.push_back(std::move(t));
    }
  }
  // -- pre-tokenizer: Split steps, then ByteLevel --
  const std::string byte_level_only =
      "\"ByteLevel\", or a \"Sequence\" of \"Split\" steps ending in \"ByteLevel\" (byte-level BPE)";
  const json& pre = rd.at(doc, "pre_tokenizer");
  if (pre.is_null()) rd.fail("pre_tokenizer", "is null (expected " + byte_level_only + ")");
  std::vector<std::pair<const json*, std::string>> steps;
  rd.flatten(pre, "pre_tokenizer.", "pretokenizers", steps);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const json& step = *steps[i].first;
    const std::string& path = steps[i].second;
    const std::string t = rd.type(step, path);
    const bool last = i + 1 == steps.size();
    if (t == "ByteLevel") {
      if (!last) rd.fail(key_of(path), "is ByteLevel but not the last step (expected ByteLevel last)");
      spec.prefix_space = rd.boolean(step, path, "add_prefix_space", true);
      if (rd.boolean(step, path, "use_regex", true)) {
        spec.byte_level_regex = std::make_unique<bpe::Regex>(
            R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", false);
      }
    } else if (t == "Split") {
      if (last) rd.fail(key_of(path), "is the last step (expected " + byte_level_only + ")");
      const json& pattern = rd.object(step, path, "pattern", "{\"Regex\": ...} or {\"String\": ...}");
      const bool literal = pattern.contains("String");
      const json& p = literal ? pattern["String"] : rd.at(pattern, "Regex");
      if (!p.is_string())
        rd.fail(path + "pattern", "is " + shown(pattern) + " (expected {\"Regex\": ...} or {\"String\": ...})");
      const json& behavior = rd.at(step, "behavior");
      if (!(behavior.is_string() && behavior.get<std::string>() == "Isolated")) {
        rd.fail(path + "behavior", shown(behavior) + " is not supported (expected \"Isolated\")");
      }
      if (rd.boolean(step, path, "invert", false)) rd.fail(path + "invert", "true is not supported (expected false)");
      try {
        spec.splits.push_back(std::make_unique<bpe::Regex>(p.get<std::string>(), literal));
      } catch (const std::invalid_argument& e) {
        rd.fail(path + "pattern." + (literal ? "String" : "Regex"), "does not compile: " + std::string(e.what()));
      }
    } else {
      rd.unsupported(path, t, last ? byte_level_only : "\"Split\" or \"ByteLevel\"");
    }
  }

  // -- decoder: ByteLevel --
  const json& dec = rd.at(doc, "decoder");
  if (dec.is_null()) rd.fail("decoder", "is null (expected \"ByteLevel\")");
  steps.clear();
  rd.flatten(dec, "decoder.", "decoders", steps);
  for (const auto& [step, path] : steps) {
    const std::string t = rd.type(*step, path);
    if (t != "ByteLevel") rd.unsupported(path, t, "\"ByteLevel\"");
  }
  if (steps.size() != 1) rd.fail("decoder", "has " + std::to_string(steps.size()) + " steps (expected one ByteLevel)");

  // -- post-processor: accepted, never applied (add_special_tokens=False) --
  const json& post = rd.at(doc, "post_processor");
  if (!post.is_null()) {
    steps.clear();
    rd.flatten(post, "post_processor.", "processors", steps);
    for (const auto& [step, path] : steps) {
      const std::string t = rd.type(*step, path);
      if (t != "ByteLevel" && t != "TemplateProcessing" && t != "RobertaProcessing" && t != "BertProcessing") {
        rd.unsupported(path, t,
                       "null, \"ByteLevel\", \"TemplateProcessing\", \"RobertaProcessing\", \"BertProcessing\" or a "
                       "\"Sequence\" of them");
      }
    }
  }

  // -- id tables for decode --
  std::int32_t max_id = -1;
  for (const auto& [tok, id] : token_ids) max_id = std::max(max_id, id);
  for (const AddedToken& t : spec.added) max_id = std::max(max_id, t.id);
  spec.vocab_size = max_id + 1;
  spec.decode_bytes.assign(spec.vocab_size, std::string());
  spec.id_kind.assign(spec.vocab_size, 0);
  for (const auto& [tok, id] : token_ids) {
    spec.decode_bytes[id] = bpe::byte_level_decode(tok);
    spec.id_kind[id] = 1;
  }
  for (const AddedToken& t : spec.added) {  // added tokens take precedence, as in HF's decode
    spec.decode_bytes[t.id] = bpe::byte_level_decode(t.content);
    spec.id_kind[t.id] = t.special ? 2 : 1;
  }
  return spec;
}

}  // namespace shardft::bpe
