// Block-wise int8 / int4 quantization (kernels/quantize.hpp), the compression step of ZeRO++ qwZ (int8
// weights) and qgZ (int4 gradients), at 1M and 16M elements with blocks of 64 and 256.
//
// "bytes_per_second" counts the fp32 side of one call only (4 bytes per element: the input of quantize,
// the output of dequantize), so the rates of the two directions and of int8 / int4 compare directly.
// "compressed_ratio" = (quantized bytes + fp32 scales) / fp32 bytes: 0.2656 int8 / 0.1406 int4 at block 64.
// Dequantize overwrites its output (int4: accumulate = false).
#include <cstdint>
#include <string>

#include "bench_util.hpp"
#include "kernels/quantize.hpp"

namespace shardft::perf {
namespace {

constexpr double kF = sizeof(float);

template <class T>
Unmanaged1<const T> cview(const View1<T>& v) { return Unmanaged1<const T>(v.data(), v.extent(0)); }
template <class T>
Unmanaged1<T> view(const View1<T>& v) { return Unmanaged1<T>(v.data(), v.extent(0)); }

struct QuantCase {
  int bits;  // 8 or 4
  std::int64_t n;
  int block;
  std::int64_t q_bytes() const { return bits == 8 ? n : int4_bytes(n); }
  double ratio() const { return (static_cast<double>(q_bytes()) + kF * quant_blocks(n, block)) / (kF * n); }
};

// Quantizes (or, with dequant, dequantizes what one quantize produced) case c once per iteration.
void quant_bench(benchmark::State& st, QuantCase c, bool dequant) {
  auto x = random_floats("x", c.n, 90);
  View1<float> scales("scales", quant_blocks(c.n, c.block)), out("out", c.n);
  View1<std::int8_t> q8("q8", c.bits == 8 ? c.n : 0);
  View1<std::uint8_t> q4("q4", c.bits == 4 ? int4_bytes(c.n) : 0);
  auto quantize = [&] {
    return c.bits == 8 ? quantize_int8(cvec(x), c.block, view(q8), view(scales))
                       : quantize_int4(cvec(x), c.block, view(q4), view(scales));
  };
  if (quantize() != 0) {
    st.SkipWithError("non-finite input");
    return;
  }
  for (auto _ : st) {
    if (!dequant) {
      benchmark::DoNotOptimize(quantize());
    } else if (c.bits == 8) {
      dequantize_int8(cview(q8), cview(scales), c.block, vec(out));
    } else {
      dequantize_int4(cview(q4), cview(scales), c.block, vec(out), false);
    }
    Kokkos::fence();
  }
  report_bytes(st, kF * static_cast<double>(c.n));
  report_items(st, static_cast<double>(c.n));
  st.counters["compressed_ratio"] = c.ratio();
}

const bool registered = [] {
  for (const int bits : {8, 4}) {
    for (const std::int64_t n : {std::int64_t{1} << 20, std::int64_t{1} << 24}) {
      for (const int block : {64, 256}) {
        for (const bool dequant : {false, true}) {
          const QuantCase c{bits, n, block};
          const std::string name = "kernel/Quant/int" + std::to_string(bits) + "/" +
                                   (dequant ? "dequantize/" : "quantize/") + std::to_string(n >> 20) + "M_b" +
                                   std::to_string(block);
          benchmark::RegisterBenchmark(name.c_str(), [c, dequant](benchmark::State& st) { quant_bench(st, c, dequant); })
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
  return true;
}();

}  // namespace
}  // namespace shardft::perf
