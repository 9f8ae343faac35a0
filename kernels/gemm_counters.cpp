#include "kernels/gemm_counters.hpp"

namespace shardft {

namespace {
GemmCounters& counters() {
  static GemmCounters c;
  return c;
}
}  // namespace

GemmCounters GemmCounters::since(const GemmCounters& e) const {
  GemmCounters d;
  d.tensor_core_flops = tensor_core_flops - e.tensor_core_flops;
  d.fp32_flops = fp32_flops - e.fp32_flops;
  d.mixed_flops = mixed_flops - e.mixed_flops;
  d.widened_elements = widened_elements - e.widened_elements;
  d.calls = calls - e.calls;
  return d;
}

double GemmCounters::tensor_core_share() const {
  const double all = total_flops();
  return all > 0 ? tensor_core_flops / all : 0.0;
}

GemmCounters gemm_counters() { return counters(); }

void count_gemm(bool a_bf16, bool b_bf16, std::int64_t m, std::int64_t n, std::int64_t k) {
  GemmCounters& c = counters();
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  ++c.calls;
  if (a_bf16 && b_bf16) {
    c.tensor_core_flops += flops;
  } else if (!a_bf16 && !b_bf16) {
    c.fp32_flops += flops;
  } else {
    c.mixed_flops += flops;
    c.widened_elements += a_bf16 ? m * k : n * k;  // the GPU path widens the whole bf16 operand once
  }
}

}  // namespace shardft
