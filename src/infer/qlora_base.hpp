#pragma once
// The base a QLoRA run trained over: its decoder matrices as the model read them, dequantize(NF4(W))
// in the run's compute dtype, not the full-precision W of model_name_or_path. A QLoRA checkpoint's
// metadata names those matrices and the dtype ("qlora_base"), so that merging its adapter
// (`consolidate --merge_adapters`, `generate` on the checkpoint) gives the model the run evaluated and
// the same weights as the run's own merged model.safetensors.
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/hf_weights.hpp"
#include "kernels/nf4_quantize.hpp"
#include "model/linear.hpp"
#include "model/param_layout.hpp"

namespace shardft {

struct QloraBase {
  std::set<std::string> nf4_params;  // HF tensor names held as NF4
  ComputeDtype dtype = ComputeDtype::fp32;
};

// {"nf4_params": [...], "compute_dtype": "bf16"} for a layout with NF4 parameters; null otherwise.
nlohmann::json qlora_base_meta(const ParamLayout& layout, ComputeDtype dtype);
// The metadata's qlora_base, if any; a malformed one is a FormatError naming `where` and the key.
std::optional<QloraBase> read_qlora_base(const nlohmann::json& meta, const std::string& where);

// host [q.numel] = what a model computing in dtype reads of q: dequantized, rounded to bf16 / fp16.
void nf4_values_as_read(const Nf4Tensor& q, ComputeDtype dtype, float* host);

// values [numel of shape] hold `name` as read from `weights` (a 4-bit save: dequantized); if the run
// held it as NF4, they become what its model read: the save's own NF4 bytes, or W quantized here.
void to_qlora_base_values(const QloraBase& base, HfModelWeights& weights, const std::string& name,
                          const std::vector<std::int64_t>& shape, float* values);

}  // namespace shardft
