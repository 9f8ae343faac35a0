#include "train/consolidate.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/hdf5_shard.hpp"
#include "train/checkpoint.hpp"
#include "train/hf_export.hpp"

namespace shardft {

namespace {

nlohmann::json read_meta(const std::string& dir) {
  std::ifstream in(dir + "/metadata.json");
  if (!in) throw FormatError("checkpoint '" + dir + "': metadata.json is missing");
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw FormatError(dir + "/metadata.json: not valid JSON (" + e.what() + ")");
  }
}

// Assembles elements [lo, lo + n) in layout order from the rank files' master slices.
class MasterReader {
 public:
  MasterReader(std::string dir, const nlohmann::json& meta) : dir_(std::move(dir)), files_(meta.at("files")) {}
  void read(std::int64_t lo, std::int64_t n, float* out) {
    std::int64_t covered = 0;
    for (std::size_t f = 0; f < files_.size(); ++f) {
      const auto t = files_[f].at("slices").get<std::vector<std::int64_t>>();
      for (std::size_t i = 0; i + 2 < t.size(); i += 3) {
        const std::int64_t b = std::max(lo, t[i]), e = std::min(lo + n, t[i] + t[i + 2]);
        if (b >= e) continue;
        reader(f).read_f32("master", static_cast<std::size_t>(t[i + 1] + (b - t[i])), static_cast<std::size_t>(e - b),
                           out + (b - lo));
        covered += e - b;
      }
    }
    if (covered != n) throw FormatError(dir_ + ": elements " + std::to_string(lo) + ".." + std::to_string(lo + n) + " are in no rank file");
  }

 private:
  Hdf5ShardReader& reader(std::size_t f) {
    if (readers_.size() <= f) readers_.resize(files_.size());
    if (!readers_[f]) readers_[f] = std::make_unique<Hdf5ShardReader>(dir_ + "/" + files_[f].at("file").get<std::string>());
    return *readers_[f];
  }
  std::string dir_;
  nlohmann::json files_;
  std::vector<std::unique_ptr<Hdf5ShardReader>> readers_;
};

}  // namespace

nlohmann::json read_checkpoint_metadata(const std::string& checkpoint_dir) { return read_meta(checkpoint_dir); }

void read_checkpoint_master(const std::string& checkpoint_dir, const nlohmann::json& meta, std::int64_t lo,
                            std::int64_t n, float* out) {
  MasterReader(checkpoint_dir, meta).read(lo, n, out);
}

ConsolidateReport consolidate_checkpoint(const std::string& dir, const ConsolidateOptions& opt) {
  const nlohmann::json meta = read_meta(dir);
  std::filesystem::create_directories(opt.output_dir);
  std::vector<TensorEntry> all;
  std::vector<std::int64_t> offsets;
  for (const auto& p : meta.at("params")) {
    all.push_back({p.at("name"), p.at("shape").get<std::vector<std::int64_t>>()});
    offsets.push_back(p.at("layout_offset"));
  }
  // Shards in order, each under max_shard_bytes (a tensor larger than that gets a shard of its own).
  std::vector<std::pair<std::size_t, std::size_t>> shards;  // [first, last) tensor
  std::uint64_t acc = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const std::uint64_t b = static_cast<std::uint64_t>(all[i].numel()) * dtype_bytes(opt.dtype);
    if (i > first && acc + b > opt.max_shard_bytes) {
      shards.emplace_back(first, i);
      first = i;
      acc = 0;
    }
    acc += b;
  }
  shards.emplace_back(first, all.size());

  ConsolidateReport rep;
  MasterReader master(dir, meta);
  nlohmann::json weight_map = nlohmann::json::object();
  std::vector<float> buf;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    char name[64];
    if (shards.size() == 1) {
      std::snprintf(name, sizeof name, "model.safetensors");
    } else {
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    }
    std::vector<TensorEntry> part(all.begin() + static_cast<long>(shards[s].first), all.begin() + static_cast<long>(shards[s].second));
    SafetensorsStreamWriter w(opt.output_dir + "/" + name, part, opt.dtype);
    for (std::size_t i = shards[s].first; i < shards[s].second; ++i) {
      buf.resize(static_cast<std::size_t>(all[i].numel()));  // grows to the largest tensor, no further
      master.read(offsets[i], all[i].numel(), buf.data());
      w.write_next(buf.data());
      weight_map[all[i].name] = name;
      rep.largest_tensor = std::max(rep.largest_tensor, all[i].numel());
      ++rep.tensors;
    }
    w.finish();
    rep.bytes += w.data_bytes();
    ++rep.files;
  }
  if (shards.size() > 1) {
    std::ofstream(opt.output_dir + "/model.safetensors.index.json")
        << nlohmann::json{{"metadata", {{"total_size", rep.bytes}}}, {"weight_map", weight_map}}.dump(2) << "\n";
  }
  write_hf_config(opt.output_dir, meta.at("model"), meta.value("hf_config", nlohmann::json()), opt.dtype);
  copy_tokenizer_files(dir, opt.output_dir);  // the checkpoint keeps the run's tokenizer files
  return rep;
}

std::string inspect_checkpoint(const std::string& dir) {
  const nlohmann::json meta = read_meta(dir);
  std::ostringstream out;
  out << dir << ": step " << meta.at("step") << ", saved by " << meta.at("world_size") << " ranks at ZeRO stage "
      << meta.at("zero_stage") << " (shard groups of " << meta.at("shard_group_size") << ")\n"
      << "model: " << meta.at("model").dump() << "\n"
      << meta.at("params").size() << " tensors, " << meta.at("total_numel") << " parameters (fp32 master + 2 AdamW moments)\n";
  for (const auto& f : meta.at("files")) {
    const std::string path = dir + "/" + f.at("file").get<std::string>();
    Hdf5ShardReader r(path);
    for (const char* name : {"master", "exp_avg", "exp_avg_sq", "slices"}) r.verify(name);
    out << "  " << f.at("file").get<std::string>() << ": " << r.length("master") << " elements per state, "
        << f.at("slices").size() / 3 << " slices, checksums ok\n";
  }
  return out.str();
}

}  // namespace shardft
