// RMSNorm over the last dimension, x / y / dy / dx [N, d], w / dw [d], rstd [N] (formulas in rmsnorm.hpp).
// forward: one team per block of kForwardRows rows, its threads over the d columns (coalesced on a GPU).
// Each thread sums its strided share of the block's rows in one fp32 accumulator per row: independent
// chains of adds (the instruction-level parallelism rmsnorm_backward gets from four accumulators within a
// row), while every row is still summed in column order. The team reduces the rows' sums as one value;
// then, row by row, every thread has rstd and the threads write y over the columns. Serial runs a team
// as one thread: each row summed j = 0, 1, ... in the one-thread-per-row loop's order (one core: 1.3x
// faster at d = 2048, as fast at d = 128). Four accumulators within a row would be faster still, but they
// change the CPU's rounding, and CPU results then move where tests sit close to their bounds.
// backward: one team per block of kRowsPerTeam rows (64 on the host, 8 on a GPU), its threads over the d
// columns. The team reduces gx_n = sum_j dy w x for all the block's rows at once (one synchronisation
// per block, not per row); then each thread takes its columns and, row by row, updates dx and sums
// dy x rstd into a register, stored once as the block's partial dw row (no atomics, no read-modify-write
// of a partial row per row); add_column_sums adds the partials block by block. For a given team size
// (one thread on Serial) the order of every sum is fixed, so results are deterministic.
#include "kernels/rmsnorm.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/math.hpp"
#include "kernels/kernel_scratch.hpp"
#include "kernels/rows.hpp"

namespace shardft {

namespace {
using Team = Kokkos::TeamPolicy<ExecSpace>;
using Member = Team::member_type;
// Backward's rows per team: 64 on the host (a team is a thread, and few partial dw rows stay in cache); 8 on
// a GPU, where 4096 rows in teams of 64 gave 64 teams for 132 multiprocessors (0.86 ms per call at
// 4096 x 2048 on an H200, a seventh of a step's fenced time) and the partial rows cost little.
constexpr std::int64_t kRowsPerTeam = Kokkos::SpaceAccessibility<HostSpace, MemSpace>::accessible ? 64 : 8;
constexpr int kForwardRows = 4;

// K rows' sums (a forward block's sums of squares, a backward block's sum_j dy w x), reduced over the
// team as one value (Kokkos::Sum): one team synchronisation for the block instead of one per row.
template <int K>
struct RowSums {
  float v[K];
  KOKKOS_INLINE_FUNCTION RowSums() {
    for (int k = 0; k < K; ++k) v[k] = 0.f;
  }
  KOKKOS_INLINE_FUNCTION RowSums& operator+=(const RowSums& o) {
    for (int k = 0; k < K; ++k) v[k] += o.v[k];
    return *this;
  }
#if KOKKOS_VERSION < 40000
  KOKKOS_INLINE_FUNCTION void operator+=(const volatile RowSums& o) volatile {  // Kokkos 3's volatile join
    for (int k = 0; k < K; ++k) v[k] += o.v[k];
  }
#endif
};
}  // namespace
}  // namespace shardft

namespace Kokkos {
template <int K>
struct reduction_identity<shardft::RowSums<K>> {
  KOKKOS_FORCEINLINE_FUNCTION static shardft::RowSums<K> sum() { return shardft::RowSums<K>(); }
};
}  // namespace Kokkos

namespace shardft {

namespace {
// Threads per block for the forward: what Kokkos recommends for the kernel, at most d / 4 (each thread
// keeps four columns or more of every row: a q/k norm over a head of 128 gets 32), a power of two.
template <class Body>
int forward_team_size(int blocks, int d, const Body& body) {
  const int recommended = Team(blocks, Kokkos::AUTO).team_size_recommended(body, Kokkos::ParallelForTag());
  const int cap = std::max(1, std::min(recommended, d / 4));
  int threads = 1;
  while (2 * threads <= cap) threads *= 2;
  return threads;
}
}  // namespace

namespace {
// y in fp32 or, for a bf16 GEMM input, in bf16: each element w x rstd in fp32, then stored (rounded once).
template <class Out>
void rmsnorm_forward_rows(const char* name, Unmanaged2<const float> x, Unmanaged1<const float> w, float eps,
                          Unmanaged2<Out> y, Unmanaged1<float> rstd) {
  const int d = static_cast<int>(x.extent(1));
  const std::int64_t rows = static_cast<std::int64_t>(x.extent(0));
  if (w.extent(0) != x.extent(1) || y.extent(0) != x.extent(0) || y.extent(1) != x.extent(1) ||
      rstd.extent(0) != x.extent(0)) {
    throw std::invalid_argument(std::string(name) + ": shapes do not match");
  }
  if (rows == 0) return;
  static_assert(kForwardRows == 4, "the accumulators below are written out for four rows");
  const int blocks = static_cast<int>((rows + kForwardRows - 1) / kForwardRows);
  const auto body = KOKKOS_LAMBDA(const Member& m) {
    const std::int64_t n0 = static_cast<std::int64_t>(m.league_rank()) * kForwardRows;
    const int nr = rows - n0 < kForwardRows ? static_cast<int>(rows - n0) : kForwardRows;
    // A last block of fewer rows reads its last row again in the missing slots (and stores nothing for
    // them): no branch in the loop.
    const float* xr[kForwardRows];
    for (int k = 0; k < kForwardRows; ++k) xr[k] = &x(n0 + (k < nr ? k : nr - 1), 0);
    const int threads = m.team_size();
    RowSums<kForwardRows> sums;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(m, threads),
        [&](const int t, RowSums<kForwardRows>& s) {
          float p0 = 0.f, p1 = 0.f, p2 = 0.f, p3 = 0.f;
          for (int j = t; j < d; j += threads) {
            p0 += xr[0][j] * xr[0][j];
            p1 += xr[1][j] * xr[1][j];
            p2 += xr[2][j] * xr[2][j];
            p3 += xr[3][j] * xr[3][j];
          }
          s.v[0] += p0;
          s.v[1] += p1;
          s.v[2] += p2;
          s.v[3] += p3;
        },
        Kokkos::Sum<RowSums<kForwardRows>>(sums));
    for (int k = 0; k < nr; ++k) {
      const float r = 1.f / kmath::sqrt(sums.v[k] / d + eps);
      Kokkos::single(Kokkos::PerTeam(m), [&] { rstd(n0 + k) = r; });
      const float* xn = xr[k];
      Out* yn = &y(n0 + k, 0);
      Kokkos::parallel_for(Kokkos::TeamThreadRange(m, d), [&](const int j) { yn[j] = Out(w(j) * (xn[j] * r)); });
    }
  };
  Kokkos::parallel_for(name, Team(blocks, forward_team_size(blocks, d, body)), body);
}
}  // namespace

void rmsnorm_forward(Unmanaged2<const float> x, Unmanaged1<const float> w, float eps, Unmanaged2<float> y,
                     Unmanaged1<float> rstd) {
  rmsnorm_forward_rows("rmsnorm_forward", x, w, eps, y, rstd);
}

void rmsnorm_forward(Unmanaged2<const float> x, Unmanaged1<const float> w, float eps, Unmanaged2<bf16> y,
                     Unmanaged1<float> rstd) {
  rmsnorm_forward_rows("rmsnorm_forward_bf16", x, w, eps, y, rstd);
}

namespace {
// x in fp32 or bf16 (a bf16 step's kept residual stream), read into fp32 registers: the same float
// operations either way, so a bf16 x gives what its fp32 widening gives.
template <class X>
void rmsnorm_backward_rows(const char* name, Unmanaged2<const X> x, Unmanaged1<const float> w,
                           Unmanaged1<const float> rstd, Unmanaged2<const float> dy, Unmanaged2<float> dx,
                           Unmanaged1<float> dw, Unmanaged2<bf16> dx_rounded) {
  const int d = static_cast<int>(x.extent(1));
  const std::int64_t rows = static_cast<std::int64_t>(x.extent(0));
  if (w.extent(0) != x.extent(1) || (dw.extent(0) != 0 && dw.extent(0) != x.extent(1)) || rstd.extent(0) != x.extent(0) ||
      dy.extent(0) != x.extent(0) || dy.extent(1) != x.extent(1) || dx.extent(0) != x.extent(0) ||
      dx.extent(1) != x.extent(1)) {
    throw std::invalid_argument(std::string(name) + ": shapes do not match");
  }
  const bool rounded = dx_rounded.extent(0) > 0;
  if (rounded && (dx_rounded.extent(0) != dx.extent(0) || dx_rounded.extent(1) != dx.extent(1))) {
    throw std::invalid_argument(std::string(name) + ": the rounded dx must have dx's shape");
  }
  if (rows == 0) return;
  const int blocks = static_cast<int>((rows + kRowsPerTeam - 1) / kRowsPerTeam);
  const auto partial = kernel_scratch<float>("rmsnorm_dw_partial", blocks, d);
  Kokkos::parallel_for(
      name, Team(blocks, Kokkos::AUTO), KOKKOS_LAMBDA(const Member& m) {
        const int blk = m.league_rank(), threads = m.team_size();
        const std::int64_t n0 = blk * kRowsPerTeam;
        const int nr = rows - n0 < kRowsPerTeam ? static_cast<int>(rows - n0) : static_cast<int>(kRowsPerTeam);
        // gx_n = sum_j dy w x for every row of the block in one team reduction. Each thread sums its
        // strided share of a row (coalesced on a GPU) in four locals: a reduction straight over
        // TeamThreadRange(m, d) keeps its accumulator in memory on the host backends, and one float
        // accumulator is a chain of dependent adds.
        RowSums<kRowsPerTeam> gx;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(m, threads),
            [&](const int t, RowSums<kRowsPerTeam>& s) {
              for (int k = 0; k < nr; ++k) {
                const X* xn = &x(n0 + k, 0);
                const float* dyn = &dy(n0 + k, 0);
                float p0 = 0.f, p1 = 0.f, p2 = 0.f, p3 = 0.f;
                int j = t;
                for (; j + 3 * threads < d; j += 4 * threads) {
                  p0 += dyn[j] * w(j) * static_cast<float>(xn[j]);
                  p1 += dyn[j + threads] * w(j + threads) * static_cast<float>(xn[j + threads]);
                  p2 += dyn[j + 2 * threads] * w(j + 2 * threads) * static_cast<float>(xn[j + 2 * threads]);
                  p3 += dyn[j + 3 * threads] * w(j + 3 * threads) * static_cast<float>(xn[j + 3 * threads]);
                }
                for (; j < d; j += threads) p0 += dyn[j] * w(j) * static_cast<float>(xn[j]);
                s.v[k] += (p0 + p1) + (p2 + p3);
              }
            },
            Kokkos::Sum<RowSums<kRowsPerTeam>>(gx));
        // Column by column, the block's rows in order: dx, its rounded copy, and the block's partial dw
        // summed in a register (the same additions, in the same order, as a row-by-row update).
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, d), [&](const int j) {
          const float wj = w(j);
          float acc = 0.f;
          for (int k = 0; k < nr; ++k) {
            const std::int64_t n = n0 + k;
            const float r = rstd(n), c = r * r * r * gx.v[k] / d;
            const float xj = static_cast<float>(x(n, j)), dyj = dy(n, j);
            const float dxj = dx(n, j) + (r * dyj * wj - c * xj);
            dx(n, j) = dxj;
            if (rounded) dx_rounded(n, j) = bf16(dxj);
            acc += dyj * xj * r;
          }
          partial(blk, j) = acc;
        });
      });
  if (dw.extent(0) > 0) add_column_sums(partial, dw);  // empty: a frozen norm weight (LoRA)
}
}  // namespace

void rmsnorm_backward(Unmanaged2<const float> x, Unmanaged1<const float> w, Unmanaged1<const float> rstd,
                      Unmanaged2<const float> dy, Unmanaged2<float> dx, Unmanaged1<float> dw,
                      Unmanaged2<bf16> dx_rounded) {
  rmsnorm_backward_rows("rmsnorm_backward_rows", x, w, rstd, dy, dx, dw, dx_rounded);
}

void rmsnorm_backward(Unmanaged2<const bf16> x, Unmanaged1<const float> w, Unmanaged1<const float> rstd,
                      Unmanaged2<const float> dy, Unmanaged2<float> dx, Unmanaged1<float> dw,
                      Unmanaged2<bf16> dx_rounded) {
  rmsnorm_backward_rows("rmsnorm_backward_rows_bf16", x, w, rstd, dy, dx, dw, dx_rounded);
}

}  // namespace shardft
