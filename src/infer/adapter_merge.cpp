#include "infer/adapter_merge.hpp"

#include <cmath>
#include <map>
#include <vector>

#include "io/peft_adapter.hpp"

namespace shardft {

void check_merged_weight(const float* w, std::int64_t n, const std::string& name, const std::string& adapter_dir,
                         double scale) {
  for (std::int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(w[i])) {
      throw FormatError(adapter_dir + ": merging the adapter of '" + name + "' (scale " + std::to_string(scale) +
                        ", lora_alpha / r) gives " + std::to_string(w[i]) + " at element " + std::to_string(i) +
                        ": adapter_config.json's lora_alpha or the adapter's values are out of range");
    }
  }
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
    check_merged_weight(weights + layout.offset(p), spec.numel(), name, adapter_dir, adapter.config.scale());
  }
  log << "adapter " << adapter_dir << ": " << adapter.tensors.size() << " LoRA pairs merged (scale "
      << adapter.config.scale() << ")" << std::endl;
}

}  // namespace shardft
