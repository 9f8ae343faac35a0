// NF4 dequantize (kernels/nf4_quantize.hpp) of a 4096 x 4096 weight into bf16: what QLoRA runs per frozen
// linear layer before its GEMMs. "bytes_per_second" counts the bytes moved by one call: the 4-bit
// storage read (nf4_storage_bytes) plus the bf16 output written (2 bytes per value).
#include <cstdint>

#include "bench_util.hpp"
#include "kernels/nf4_quantize.hpp"

namespace shardft::perf {
namespace {

void nf4_dequantize_bf16(benchmark::State& st) {
  const std::int64_t rows = 4096, cols = 4096, n = rows * cols;
  auto w = random_floats("w", n, 91, 0.02f);
  const Nf4Tensor q = nf4_quantize(Unmanaged1<const float>(w.data(), n), {rows, cols}, "bench");
  View1<bf16> out("out", n);
  for (auto _ : st) {
    nf4_dequantize(q, Unmanaged1<bf16>(out.data(), n));
    Kokkos::fence();
  }
  report_bytes(st, static_cast<double>(q.storage_bytes()) + 2.0 * static_cast<double>(n));
  report_items(st, static_cast<double>(n));
}

const bool registered = [] {
  benchmark::RegisterBenchmark("kernel/NF4/dequantize_bf16/4096x4096", nf4_dequantize_bf16)
      ->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace
}  // namespace shardft::perf
