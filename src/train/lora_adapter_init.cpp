#include "train/lora_adapter_init.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <vector>

#include "config/lora_config.hpp"
#include "io/peft_adapter.hpp"

namespace shardft {

void load_adapter_factors(ZeroEngine& engine, const ParamLayout& layout, const std::string& adapter_dir) {
  const PeftAdapter adapter = read_peft_adapter(adapter_dir);
  std::map<std::string, std::vector<std::int64_t>> base_shapes;
  for (const ParamSpec& p : layout.params()) {
    if (!p.is_lora()) base_shapes[p.name] = p.shape;
  }
  check_peft_adapter_matches(adapter, base_shapes, adapter_dir);
  // A layout factor "<module path>.lora_A.weight" is the adapter's A of "<module path>.weight".
  auto factor_of = [&](const ParamSpec& p) -> const TensorF32& {
    const std::string tail = p.kind == ParamKind::lora_a ? ".lora_A.weight" : ".lora_B.weight";
    const std::string base = p.name.substr(0, p.name.size() - tail.size()) + ".weight";
    const auto it = adapter.tensors.find(base);
    if (it == adapter.tensors.end()) {
      throw FormatError(adapter_dir + ": the adapter has no " + (p.kind == ParamKind::lora_a ? "A" : "B") +
                        " for '" + base + "', which the recipe's LoRA targets");
    }
    const TensorF32& t = p.kind == ParamKind::lora_a ? it->second.A : it->second.B;
    if (t.shape != p.shape) {
      throw FormatError(adapter_dir + ": the factor '" + p.name + "' has another shape than the recipe's lora_r implies");
    }
    return t;
  };
  for (const ParamSpec& p : layout.params()) {
    if (p.is_lora()) factor_of(p);  // every factor present, before any rank loads
  }
  engine.load_weights(
      [&](int param, std::int64_t first, std::int64_t count, float* out) {
        const TensorF32& t = factor_of(layout.params()[param]);
        std::copy_n(t.data.begin() + first, count, out);
      },
      ParamSet::trainable);
}

}  // namespace shardft
