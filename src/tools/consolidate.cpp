#include "tools/consolidate.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "io/checkpoint_meta.hpp"
#include "io/hdf5_shard.hpp"
#include "train/checkpoint.hpp"
#include "infer/checkpoint_read.hpp"
#include "infer/hf_export.hpp"
#include "train/output_path.hpp"

namespace shardft {

namespace {
// model.safetensors, model-00001-of-00003.safetensors or model.safetensors.index.json: what an export
// writes (and a later one replaces).
bool is_weight_file(const std::string& name) {
  if (name == "model.safetensors" || name == "model.safetensors.index.json") return true;
  static const std::string shard = "model-00000-of-00000.safetensors";
  if (name.size() != shard.size() || name.compare(0, 6, "model-") != 0 || name.compare(11, 4, "-of-") != 0 ||
      name.compare(20, 12, ".safetensors") != 0) {
    return false;
  }
  for (std::size_t i : {6, 7, 8, 9, 10, 15, 16, 17, 18, 19}) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  return true;
}

std::vector<std::string> remove_stale_weight_files(const std::string& dir, const std::set<std::string>& written) {
  std::vector<std::string> removed;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || !is_weight_file(name) || written.count(name) > 0) continue;
    std::filesystem::remove(e.path());  // throws, naming the path, when it cannot
    removed.push_back(e.path().string());
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}
}  // namespace

ConsolidateReport write_safetensors_shards(const std::string& output_dir, const std::vector<TensorEntry>& all,
                                           const ConsolidateOptions& opt,
                                           const std::function<void(std::size_t, float*)>& fill) {
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
  std::set<std::string> written;
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
    SafetensorsStreamWriter w(output_dir + "/" + name, part, opt.dtype);
    written.insert(name);
    for (std::size_t i = shards[s].first; i < shards[s].second; ++i) {
      buf.resize(static_cast<std::size_t>(all[i].numel()));  // grows to the largest tensor, no further
      fill(i, buf.data());
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
    std::ofstream(output_dir + "/model.safetensors.index.json")
        << nlohmann::json{{"metadata", {{"total_size", rep.bytes}}}, {"weight_map", weight_map}}.dump(2) << "\n";
    written.insert("model.safetensors.index.json");
  }
  rep.removed = remove_stale_weight_files(output_dir, written);
  return rep;
}

ConsolidateReport consolidate_checkpoint(const std::string& dir, const ConsolidateOptions& opt, std::ostream& log) {
  if (std::filesystem::exists(dir + "/adapter_config.json")) {
    throw FormatError(dir + " is a LoRA checkpoint: it holds the trained adapter (adapter_model.safetensors, which "
                      "peft.PeftModel.from_pretrained loads), not the base weights; pass --merge_adapters to write "
                      "the base with the adapter merged");
  }
  const nlohmann::json meta = verify_checkpoint_for_reading(dir, log);
  create_output_dir(opt.output_dir, "--output");
  std::vector<TensorEntry> all;
  std::vector<std::int64_t> offsets;
  for (const auto& p : meta.at("params")) {
    all.push_back({p.at("name"), p.at("shape").get<std::vector<std::int64_t>>()});
    offsets.push_back(p.at("layout_offset"));
  }
  CheckpointMasterReader master(dir, meta);
  const ConsolidateReport rep = write_safetensors_shards(opt.output_dir, all, opt, [&](std::size_t i, float* out) {
    master.read(offsets[i], all[i].numel(), out);
  });
  write_hf_config(opt.output_dir, meta.at("model"), meta.value("hf_config", nlohmann::json()), opt.dtype);
  copy_tokenizer_files(dir, opt.output_dir);  // the checkpoint keeps the run's tokenizer files
  copy_generation_config(dir, opt.output_dir);
  return rep;
}

std::string inspect_checkpoint(const std::string& dir) {
  const CheckpointMeta cm = read_checkpoint_meta(dir);
  const nlohmann::json& meta = cm.json;
  std::ostringstream out;
  out << dir << ": step " << meta.at("step") << ", saved by " << meta.at("world_size") << " ranks at ZeRO stage "
      << meta.at("zero_stage") << " (shard groups of " << meta.at("shard_group_size") << ")\n"
      << "model: " << meta.at("model").dump() << "\n"
      << meta.at("params").size() << " tensors, " << meta.at("total_numel") << " parameters (fp32 master + 2 AdamW moments)\n"
      << "metadata.json: " << (cm.sealed ? "seal ok (" + meta.at("seal").get<std::string>() + ")" : "warning: " + cm.warning)
      << "\n";
  for (std::size_t i = 0; i < meta.at("files").size(); ++i) {
    const auto& f = meta.at("files")[i];
    verify_rank_file(cm, i);
    const Hdf5ShardReader r(dir + "/" + f.at("file").get<std::string>());
    out << "  " << f.at("file").get<std::string>() << ": " << r.length("master") << " elements per state, "
        << f.at("slices").size() / 3 << " slices, checksums ok, attributes match metadata.json\n";
  }
  if (meta.contains("adapter_files")) {
    verify_adapter_files(cm);
    out << "  LoRA adapter (r " << meta.at("lora").value("r", 0) << ", lora_alpha " << meta.at("lora").value("lora_alpha", 0.0)
        << "): adapter_model.safetensors, adapter_config.json: checksums ok\n";
  } else if (cm.sealed && !cm.warning.empty()) {
    out << "warning: " << cm.warning << "\n";
  }
  return out.str();
}

}  // namespace shardft
