#include "train/merge_adapters.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/hf_weights.hpp"
#include "io/peft_adapter.hpp"
#include "train/checkpoint.hpp"
#include "train/hf_export.hpp"
#include "train/output_path.hpp"
#include "train/qlora_base.hpp"

namespace shardft {

namespace {
// The merged weight W + scale B A: finite values with a huge lora_alpha can still overflow it, and a
// non-finite weight must not be written or generated with.
void check_merged(const float* w, std::int64_t n, const std::string& name, const std::string& adapter_dir, double scale) {
  for (std::int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(w[i])) {
      throw FormatError(adapter_dir + ": merging the adapter of '" + name + "' (scale " + std::to_string(scale) +
                        ", lora_alpha / r) gives " + std::to_string(w[i]) + " at element " + std::to_string(i) +
                        ": adapter_config.json's lora_alpha or the adapter's values are out of range");
    }
  }
}
}  // namespace

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
    check_merged(out, tensors[i].numel(), tensors[i].name, adapter_dir, scale);
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

void merge_adapter_into_weights(const std::string& adapter_dir, const ParamLayout& layout, float* weights,
                                std::ostream& log) {
  const PeftAdapter adapter = read_peft_adapter(adapter_dir);
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const ParamSpec& p : layout.params()) shapes[p.name] = p.shape;
  check_peft_adapter_matches(adapter, shapes, adapter_dir + " over the model");
  for (const auto& [name, f] : adapter.tensors) {
    const int p = layout.index(name);
    const ParamSpec& spec = layout.params()[p];
    merge_lora_into(weights + layout.offset(p), spec.shape[0], spec.shape[1], f.A.data.data(), f.B.data.data(),
                    f.A.shape[0], adapter.config.scale());
    check_merged(weights + layout.offset(p), spec.numel(), name, adapter_dir, adapter.config.scale());
  }
  log << "adapter " << adapter_dir << ": " << adapter.tensors.size() << " LoRA pairs merged (scale "
      << adapter.config.scale() << ")" << std::endl;
}

}  // namespace shardft
