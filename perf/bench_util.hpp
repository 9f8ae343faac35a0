#pragma once
// Helpers shared by the perf/ suites: deterministic random device buffers, 2-D views over them,
// and the rate counters every benchmark reports (compare.py reads these names).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>

#include "kernels/types.hpp"

namespace shardft::perf {

// A device buffer of n floats, uniform in [-scale, scale), the same on every run for a given seed.
inline View1<float> random_floats(const std::string& name, std::int64_t n, std::uint32_t seed, float scale = 1.f) {
  View1<float> v(Kokkos::view_alloc(Kokkos::WithoutInitializing, name), n);
  auto h = Kokkos::create_mirror_view(v);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (std::int64_t i = 0; i < n; ++i) h(i) = dist(rng);
  Kokkos::deep_copy(v, h);
  return v;
}

// A device buffer of n token ids, uniform in [0, vocab); every `ignore_every`-th entry is -100 when > 0.
inline View1<std::int32_t> random_ids(const std::string& name, std::int64_t n, int vocab, std::uint32_t seed,
                                      int ignore_every = 0) {
  View1<std::int32_t> v(Kokkos::view_alloc(Kokkos::WithoutInitializing, name), n);
  auto h = Kokkos::create_mirror_view(v);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(0, vocab - 1);
  for (std::int64_t i = 0; i < n; ++i) h(i) = (ignore_every > 0 && i % ignore_every == 0) ? kIgnoreIndex : dist(rng);
  Kokkos::deep_copy(v, h);
  return v;
}

inline Unmanaged2<float> mat(const View1<float>& v, std::int64_t rows, std::int64_t cols) {
  return Unmanaged2<float>(v.data(), rows, cols);
}
inline Unmanaged2<const float> cmat(const View1<float>& v, std::int64_t rows, std::int64_t cols) {
  return Unmanaged2<const float>(v.data(), rows, cols);
}
inline Unmanaged1<float> vec(const View1<float>& v) { return Unmanaged1<float>(v.data(), v.extent(0)); }
inline Unmanaged1<const float> cvec(const View1<float>& v) { return Unmanaged1<const float>(v.data(), v.extent(0)); }
inline Unmanaged1<const std::int32_t> cids(const View1<std::int32_t>& v) {
  return Unmanaged1<const std::int32_t>(v.data(), v.extent(0));
}

// A per-iteration amount reported as amount per second of real time (iteration-invariant rate).
inline benchmark::Counter per_second(double per_iteration) {
  return benchmark::Counter(per_iteration, benchmark::Counter::kIsIterationInvariantRate);
}

// "GFLOPS": billions of floating-point operations per second, from the FLOPs of one iteration.
inline void report_gflops(benchmark::State& st, double flops_per_iteration) {
  st.counters["GFLOPS"] = per_second(flops_per_iteration / 1e9);
}

// "bytes_per_second": the compulsory memory traffic of one iteration (each operand read / written once).
inline void report_bytes(benchmark::State& st, double bytes_per_iteration) {
  st.SetBytesProcessed(static_cast<std::int64_t>(bytes_per_iteration * static_cast<double>(st.iterations())));
}

// "items_per_second": elements (or tokens) handled per iteration.
inline void report_items(benchmark::State& st, double items_per_iteration) {
  st.SetItemsProcessed(static_cast<std::int64_t>(items_per_iteration * static_cast<double>(st.iterations())));
}

}  // namespace shardft::perf
