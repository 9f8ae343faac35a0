#include "tools/merge_adapters.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/hf_weights.hpp"
#include "io/peft_adapter.hpp"
#include "infer/adapter_merge.hpp"
#include "train/checkpoint.hpp"
#include "infer/checkpoint_read.hpp"
#include "infer/hf_export.hpp"
#include "train/output_path.hpp"
#include "infer/qlora_base.hpp"

namespace shardft {

ConsolidateReport merge_adapters_into_base(const std::string& adapter_dir, const std::string& base_dir,
                                           const ConsolidateOptions& opt, std::ostream& log) {
  namespace fs = std::filesystem;
  if (!fs::exists(adapter_dir + "/adapter_config.json")) {
    throw FormatError(adapter_dir + ": --merge_adapters needs a LoRA adapter folder (adapter_config.json + "
                      "adapter_model.safetensors); this one has no adapter_config.json");
  }
  // A checkpoint's rank files hold the same A and B; verifying them keeps a damaged save from being merged.
  std::optional<QloraBase> qlora;
  if (fs::exists(adapter_dir + "/metadata.json")) {
    qlora = read_qlora_base(verify_checkpoint_for_reading(adapter_dir, log), adapter_dir + "/metadata.json");
  }
  const PeftAdapter adapter = read_peft_adapter(adapter_dir);
  const std::string base = base_dir.empty() ? adapter.config.base_model_name_or_path : base_dir;
  if (base.empty()) {
    throw FormatError(adapter_dir + "/adapter_config.json: base_model_name_or_path is empty; name the base with --base DIR");
  }
  if (!fs::is_directory(base)) {
    throw FormatError((base_dir.empty() ? adapter_dir + "/adapter_config.json: base_model_name_or_path '"
                                        : std::string("--base '")) +
                      base + "' is not a directory holding the base model (give it with --base DIR)");
  }
  HfModelWeights weights(base);
  std::map<std::string, std::vector<std::int64_t>> shapes;
  std::vector<TensorEntry> tensors;
  for (const std::string& name : weights.names()) {
    shapes[name] = weights.shape(name);
    tensors.push_back({name, shapes[name]});
  }
  check_peft_adapter_matches(adapter, shapes, adapter_dir + " over " + weights.description());
  create_output_dir(opt.output_dir, "--output");
  const double scale = adapter.config.scale();
  const ConsolidateReport rep = write_safetensors_shards(opt.output_dir, tensors, opt, [&](std::size_t i, float* out) {
    weights.read(tensors[i].name, 0, tensors[i].numel(), out);
    if (qlora) to_qlora_base_values(*qlora, weights, tensors[i].name, tensors[i].shape, out);
    const auto lora = adapter.tensors.find(tensors[i].name);
    if (lora == adapter.tensors.end()) return;
    const LoraFactors& f = lora->second;
    merge_lora_into(out, tensors[i].shape[0], tensors[i].shape[1], f.A.data.data(), f.B.data.data(), f.A.shape[0],
                    scale);
    check_merged_weight(out, tensors[i].numel(), tensors[i].name, adapter_dir, scale);
  });
  // The base's config.json, with torch_dtype saying what was written; tokenizer files from the adapter
  // folder when it has them (a shardft checkpoint does), else from the base.
  std::ifstream in(base + "/config.json");
  if (!in) throw FormatError(base + "/config.json: missing; the merged model needs its base's config");
  nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
  if (config.is_discarded()) throw FormatError(base + "/config.json: not valid JSON");
  config.erase("quantization_config");  // a 4-bit base is merged dequantized: full-precision weights
  config["torch_dtype"] = opt.dtype == TensorDtype::BF16 ? "bfloat16" : opt.dtype == TensorDtype::F16 ? "float16" : "float32";
  std::ofstream(opt.output_dir + "/config.json") << config.dump(2) << "\n";
  if (copy_tokenizer_files(adapter_dir, opt.output_dir).empty()) copy_tokenizer_files(base, opt.output_dir);
  if (!copy_generation_config(adapter_dir, opt.output_dir)) copy_generation_config(base, opt.output_dir);
  if (qlora) log << "QLoRA checkpoint: its base's " << qlora->nf4_params.size() << " NF4 matrices merged as the run read them" << std::endl;
  log << "merged " << adapter.tensors.size() << " LoRA pairs (scale " << scale << ") into " << weights.description()
      << std::endl;
  return rep;
}

}  // namespace shardft
