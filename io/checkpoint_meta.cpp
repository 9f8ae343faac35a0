#include "io/checkpoint_meta.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "io/hdf5_shard.hpp"

namespace shardft {

namespace {

std::string hex_digest(const std::string& text, DigestAlgorithm a) { return digest_text(a, text.data(), text.size()); }

// The digests of a checkpoint of this format: XXH3-64 from format 3 on, FNV-1a 64 before.
DigestAlgorithm format_digests(const nlohmann::json& meta) {
  const bool v3 = meta.is_object() && meta.contains("format") && meta["format"] == kCheckpointFormat;
  return v3 ? DigestAlgorithm::xxh3_64 : DigestAlgorithm::fnv1a64;
}

// Type checks for the fields readers use: a damaged format-1 file (no seal) or a sealed one written by
// hand must fail here with the field's name, not later inside nlohmann with a bare type_error.
class Fields {
 public:
  explicit Fields(std::string path) : path_(std::move(path)) {}
  [[noreturn]] void bad(const std::string& field, const std::string& expected) const {
    throw FormatError(path_ + ": \"" + field + "\": expected " + expected);
  }
  const nlohmann::json& get(const nlohmann::json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object() || !obj.contains(key)) throw FormatError(path_ + ": \"" + where + key + "\" is missing");
    return obj.at(key);
  }
  void integer(const nlohmann::json& obj, const char* key, std::int64_t min, const std::string& where = "") const {
    const auto& v = get(obj, key, where);
    if (!v.is_number_integer() || v.get<std::int64_t>() < min) bad(where + key, "an integer >= " + std::to_string(min));
  }
  void integers(const nlohmann::json& v, const std::string& field) const {
    if (!v.is_array()) bad(field, "an array of integers");
    for (const auto& x : v) {
      if (!x.is_number_integer()) bad(field, "an array of integers");
    }
  }

 private:
  std::string path_;
};

// The PEFT files a LoRA checkpoint carries (io/peft_adapter.hpp names them; io/ keeps this file free of
// that header's dependencies).
constexpr const char* kAdapterFiles[] = {"adapter_model.safetensors", "adapter_config.json"};

bool is_rank_file_name(const std::string& s) {
  if (s.size() != 13 || s.compare(0, 5, "rank-") != 0 || s.compare(10, 3, ".h5") != 0) return false;
  return std::all_of(s.begin() + 5, s.begin() + 10, [](char c) { return c >= '0' && c <= '9'; });
}

void check_fields(const nlohmann::json& meta, const std::string& path) {
  const Fields f(path);
  if (!meta.is_object()) throw FormatError(path + ": not a JSON object");
  for (const char* key : {"step", "zero_stage", "total_numel"}) f.integer(meta, key, 0);
  for (const char* key : {"world_size", "shard_group_size"}) f.integer(meta, key, 1);
  if (meta.contains("train_loss_sum") && !meta["train_loss_sum"].is_number()) f.bad("train_loss_sum", "a number");
  if (!f.get(meta, "model", "").is_object()) f.bad("model", "an object");
  const auto& params = f.get(meta, "params", "");
  if (!params.is_array()) f.bad("params", "an array");
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::string where = "params[" + std::to_string(i) + "].";
    if (!f.get(params[i], "name", where).is_string()) f.bad(where + "name", "a string");
    f.integers(f.get(params[i], "shape", where), where + "shape");
    f.integer(params[i], "layout_offset", 0, where);
  }
  const auto& files = f.get(meta, "files", "");
  if (!files.is_array() || files.empty()) f.bad("files", "a non-empty array");
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string where = "files[" + std::to_string(i) + "].";
    const auto& name = f.get(files[i], "file", where);
    // Only a plain rank-file name: a path would let a damaged entry read outside the checkpoint.
    if (!name.is_string() || !is_rank_file_name(name.get<std::string>())) f.bad(where + "file", "a name rank-NNNNN.h5");
    f.integer(files[i], "rank", 0, where);
    const auto& slices = f.get(files[i], "slices", where);
    f.integers(slices, where + "slices");
    if (slices.size() % 3 != 0) f.bad(where + "slices", "(layout_offset, owned_offset, length) triples");
    // Format 3: the digest of the whole rank file.
    DigestAlgorithm algorithm;
    if (meta.at("format") == kCheckpointFormat &&
        (!f.get(files[i], "digest", where).is_string() || !digest_algorithm_of(files[i]["digest"], &algorithm))) {
      f.bad(where + "digest", "a digest string (xxh3_64:...)");
    }
  }
  if (meta.contains("adapter_files")) {
    const auto& adapter = meta["adapter_files"];
    if (!adapter.is_object()) f.bad("adapter_files", "an object of file name -> digest");
    for (const auto& [name, digest] : adapter.items()) {
      if (name != kAdapterFiles[0] && name != kAdapterFiles[1]) f.bad("adapter_files", "the PEFT adapter files only");
      if (!digest.is_string()) f.bad("adapter_files." + name, "a digest string");
    }
  }
  if (meta.contains("run_id") && !meta["run_id"].is_string()) f.bad("run_id", "a string");
  if (meta.contains("lora")) {
    const auto& lora = meta["lora"];
    f.integer(lora, "r", 1, "lora.");
    if (!f.get(lora, "lora_alpha", "lora.").is_number()) f.bad("lora.lora_alpha", "a number");
    if (!f.get(lora, "use_rslora", "lora.").is_boolean()) f.bad("lora.use_rslora", "true or false");
  }
}

std::string attr_or(const Attributes& a, const char* key, const char* missing) {
  const auto it = a.find(key);
  return it == a.end() ? missing : it->second;
}

}  // namespace

std::string metadata_digest(const nlohmann::json& meta) {
  nlohmann::json copy = meta;
  if (copy.is_object()) copy.erase("seal");
  return hex_digest(copy.dump(), format_digests(meta));
}

void seal_metadata(nlohmann::json& meta) { meta["seal"] = metadata_digest(meta); }

std::string layout_fingerprint(const nlohmann::json& params, std::int64_t total_numel) {
  std::ostringstream text;
  text << total_numel << ";";
  for (const auto& p : params) text << p.at("name").get<std::string>() << p.at("shape").dump() << "@" << p.at("layout_offset") << ";";
  return hex_digest(text.str(), DigestAlgorithm::fnv1a64);
}

CheckpointMeta parse_checkpoint_meta(const std::string& text, const std::string& dir) {
  CheckpointMeta m;
  m.dir = dir;
  m.path = dir + "/metadata.json";
  try {
    m.json = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw FormatError(m.path + ": not valid JSON (" + e.what() + "): the file is damaged");
  }
  const std::string format = m.json.is_object() && m.json.contains("format") && m.json["format"].is_string()
                                 ? m.json["format"].get<std::string>()
                                 : "";
  m.format = format;
  if (format == kCheckpointFormat || format == kCheckpointFormatV2) {
    if (!m.json.contains("seal") || !m.json["seal"].is_string()) {
      throw FormatError(m.path + ": \"seal\" is missing: the file is damaged or was edited");
    }
    const std::string want = metadata_digest(m.json), have = m.json["seal"].get<std::string>();
    if (want != have) {
      throw FormatError(m.path + ": seal mismatch (content " + want + ", seal " + have +
                        "): the file is damaged or was edited");
    }
    m.sealed = true;
  } else if (format == kCheckpointFormatV1) {
    m.warning = m.path + ": a " + std::string(kCheckpointFormatV1) +
                " checkpoint (written before metadata was sealed): its metadata is checked against the rank files "
                "but carries no seal of its own";
  } else {
    throw FormatError(m.path + ": \"format\" is '" + format + "', expected " + kCheckpointFormat + " (or " +
                      kCheckpointFormatV2 + ", " + kCheckpointFormatV1 + "): not a shardft checkpoint, or a damaged one");
  }
  check_fields(m.json, m.path);
  m.layout = layout_fingerprint(m.json.at("params"), m.json.at("total_numel").get<std::int64_t>());
  return m;
}

CheckpointMeta read_checkpoint_meta(const std::string& dir) {
  std::ifstream in(dir + "/metadata.json", std::ios::binary);
  if (!in) throw FormatError("checkpoint '" + dir + "': metadata.json is missing (an interrupted save?)");
  std::ostringstream text;
  text << in.rdbuf();
  CheckpointMeta meta = parse_checkpoint_meta(text.str(), dir);
  std::error_code ec;
  if (!meta.json.contains("adapter_files") && std::filesystem::exists(dir + "/" + kAdapterFiles[1], ec)) {
    meta.warning += std::string(meta.warning.empty() ? "" : "; ") + dir +
                    ": a LoRA checkpoint written before adapter checksums: its adapter files are read unverified";
  }
  return meta;
}

std::string file_digest(const std::string& path, DigestAlgorithm algorithm) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(path + ": cannot be read");
  std::vector<char> chunk(1 << 20);
  Digest64 d(algorithm);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    d.update(chunk.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw FormatError(path + ": read error");
  return d.text();
}

nlohmann::json adapter_file_digests(const std::string& dir) {
  nlohmann::json out = nlohmann::json::object();
  for (const char* name : kAdapterFiles) out[name] = file_digest(dir + "/" + name);
  return out;
}

void verify_adapter_files(const CheckpointMeta& meta) {
  if (!meta.json.contains("adapter_files")) return;
  for (const auto& [name, want] : meta.json.at("adapter_files").items()) {
    const std::string path = meta.dir + "/" + name;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      throw FormatError(path + ": missing; " + meta.path + " records it as part of the checkpoint");
    }
    DigestAlgorithm algorithm = DigestAlgorithm::fnv1a64;  // what a digest without a known name is compared as
    digest_algorithm_of(want.get<std::string>(), &algorithm);
    const std::string got = file_digest(path, algorithm);
    if (got != want.get<std::string>()) {
      throw FormatError(path + ": checksum " + got + ", " + meta.path + " recorded " + want.get<std::string>() +
                        ": the adapter was changed or damaged after the save");
    }
  }
}

void verify_rank_file(const CheckpointMeta& meta, std::size_t index) {
  const nlohmann::json& entry = meta.json.at("files").at(index);
  const std::string path = meta.dir + "/" + entry.at("file").get<std::string>();
  // Format 3: the whole file against its digest first, so that HDF5 never parses a damaged file (its
  // library can crash on damaged metadata); the datasets are then the bytes written, their own checksums
  // with them.
  const bool whole_file = entry.contains("digest");
  if (whole_file) {
    const std::string want = entry.at("digest").get<std::string>();
    DigestAlgorithm algorithm = DigestAlgorithm::xxh3_64;
    digest_algorithm_of(want, &algorithm);
    const std::string got = file_digest(path, algorithm);
    if (got != want) {
      throw FormatError(path + ": checksum mismatch (file " + got + ", " + meta.path + " recorded " + want +
                        "): the file is damaged");
    }
  }
  const Hdf5ShardReader r(path);
  const std::string step = std::to_string(meta.json.at("step").get<std::int64_t>());
  const std::string world = std::to_string(meta.json.at("world_size").get<std::int64_t>());
  for (const char* name : kCheckpointDatasets) {
    const Attributes a = r.attributes(name);
    auto differs = [&](const char* key, const std::string& expected) {
      const std::string got = attr_or(a, key, "(none)");
      if (got != expected) {
        throw FormatError(r.path() + ": dataset '" + name + "': attribute " + key + " is " + got + ", " + meta.path +
                          " says " + expected + ": the two do not belong together");
      }
    };
    if (meta.sealed) {
      differs("format", meta.format);
      differs("layout", meta.layout);
    } else if (a.count("format")) {
      differs("format", kCheckpointFormatV1);  // a newer rank file under metadata edited to look older
    }
    differs("step", step);
    differs("world_size", world);
    if (!whole_file) r.verify(name);
  }
  const std::vector<std::int64_t> table = r.read_i64("slices");
  if (table != entry.at("slices").get<std::vector<std::int64_t>>()) {
    throw FormatError(r.path() + ": dataset 'slices' differs from the slice table in " + meta.path);
  }
  for (const char* name : {"master", "exp_avg", "exp_avg_sq"}) {
    const std::int64_t n = static_cast<std::int64_t>(r.length(name));
    for (std::size_t i = 0; i + 2 < table.size(); i += 3) {
      if (table[i + 1] < 0 || table[i + 2] < 0 || table[i + 1] + table[i + 2] > n) {
        throw FormatError(r.path() + ": dataset '" + name + "': " + std::to_string(n) +
                          " elements, but its slice table reaches element " + std::to_string(table[i + 1] + table[i + 2]));
      }
    }
  }
}

void verify_checkpoint_files(const CheckpointMeta& meta) {
  for (std::size_t i = 0; i < meta.json.at("files").size(); ++i) verify_rank_file(meta, i);
  verify_adapter_files(meta);
}

}  // namespace shardft
