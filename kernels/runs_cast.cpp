#include "kernels/runs_cast.hpp"

#include <stdexcept>

#include "kernels/fp16.hpp"

namespace shardft {

namespace {
using Member = TeamLaunch::member_type;

void check(std::size_t src_size, const FlatRuns& runs) {
  if (runs.span > static_cast<std::int64_t>(src_size)) throw std::invalid_argument("cast_runs: the runs reach beyond src");
}
}  // namespace

void cast_runs(Unmanaged1<const float> src, const FlatRuns& runs, RunCast cast, Unmanaged1<float> dst) {
  check(src.extent(0), runs);
  const float* s = src.data();
  float* d = dst.data();
  for_each_run_in_chunks(
      "cast_runs", runs, KOKKOS_LAMBDA(const Member& m, const std::int64_t off, const std::int64_t a, const std::int64_t b) {
        float* to = d + off;
        if (cast == RunCast::round_bf16) {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(m, a, b), [&](const std::int64_t i) { to[i] = round_to_bf16(s[i]); });
        } else if (cast == RunCast::round_fp16) {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(m, a, b), [&](const std::int64_t i) { to[i] = round_to_fp16(s[i]); });
        } else {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(m, a, b), [&](const std::int64_t i) { to[i] = s[i]; });
        }
      });
}

void cast_runs(Unmanaged1<const float> src, const FlatRuns& runs, Unmanaged1<bf16> dst) {
  check(src.extent(0), runs);
  const float* s = src.data();
  bf16* d = dst.data();
  for_each_run_in_chunks(
      "cast_runs_bf16", runs, KOKKOS_LAMBDA(const Member& m, const std::int64_t off, const std::int64_t a, const std::int64_t b) {
        bf16* to = d + off;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, a, b), [&](const std::int64_t i) { to[i] = bf16(s[i]); });
      });
}

}  // namespace shardft
