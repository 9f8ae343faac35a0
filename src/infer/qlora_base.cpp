#include "infer/qlora_base.hpp"

#include <Kokkos_Core.hpp>

#include "parallel/zero/nf4_weights.hpp"

namespace shardft {

nlohmann::json qlora_base_meta(const ParamLayout& layout, ComputeDtype dtype) {
  nlohmann::json names = nlohmann::json::array();
  for (const ParamSpec& p : layout.params()) {
    if (p.nf4) names.push_back(p.name);
  }
  if (names.empty()) return nullptr;
  return {{"nf4_params", names}, {"compute_dtype", compute_dtype_name(dtype)}};
}

std::optional<QloraBase> read_qlora_base(const nlohmann::json& meta, const std::string& where) {
  const auto it = meta.find("qlora_base");
  if (it == meta.end() || it->is_null()) return std::nullopt;
  QloraBase base;
  try {
    for (const auto& n : it->at("nf4_params")) base.nf4_params.insert(n.get<std::string>());
    const std::string d = it->at("compute_dtype").get<std::string>();
    if (d == "bf16") base.dtype = ComputeDtype::bf16;
    else if (d == "fp16") base.dtype = ComputeDtype::fp16;
    else if (d == "fp32") base.dtype = ComputeDtype::fp32;
    else throw FormatError(where + ": qlora_base.compute_dtype is '" + d + "', expected bf16, fp16 or fp32");
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(where + ": qlora_base: expected {nf4_params: [names], compute_dtype}: " + e.what());
  }
  return base;
}

void nf4_values_as_read(const Nf4Tensor& q, ComputeDtype dtype, float* host) {
  View1<float> out("qlora_base_values", q.numel);
  nf4_dequantize_as_read(q.packed, q.absmax_q, q.absmax2, q.offset, dtype, out);
  Kokkos::deep_copy(Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(host, q.numel), out);
}

void to_qlora_base_values(const QloraBase& base, HfModelWeights& weights, const std::string& name,
                          const std::vector<std::int64_t>& shape, float* values) {
  if (!base.nf4_params.count(name)) return;
  if (weights.is_nf4(name)) {
    nf4_values_as_read(weights.read_nf4(name), base.dtype, values);
    return;
  }
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  View1<float> w("qlora_base_full_precision", n);
  Kokkos::deep_copy(w, Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(values, n));
  nf4_values_as_read(nf4_quantize(w, shape, name), base.dtype, values);
}

}  // namespace shardft
