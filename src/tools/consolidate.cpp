#include "tools/consolidate.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/checkpoint_meta.hpp"
#include "io/hdf5_shard.hpp"
#include "train/checkpoint.hpp"
#include "infer/checkpoint_read.hpp"
#include "infer/hf_export.hpp"
#include "train/output_path.hpp"

namespace shardft {

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
