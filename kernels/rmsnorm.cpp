// RMSNorm over the last dimension, x / y / dy / dx [N, d], w / dw [d], rstd [N] (formulas in rmsnorm.hpp).
// forward: one team per block of kForwardRows rows, its threads over the d columns (coalesced on a GPU).
// Each thread sums its strided share of the block's rows in one fp32 accumulator per row: independent
// chains of adds (the instruction-level parallelism rmsnorm_backward gets from four accumulators within a
// row), while every row is still summed in column order. The team reduces the rows' sums as one value;
// then, row by row, every thread has rstd and the threads write y over the columns. Serial runs a team
// as one thread: each row summed j = 0, 1, ... in the one-thread-per-row loop's order (one core: 1.3x
// faster at d = 2048, as fast at d = 128). On the host the forward runs forward_rows_on_host: the same
// sums in the same order, with the rounding and the writes in loops the compiler vectorises. Four accumulators within a row would be faster still, but they
// change the CPU's rounding, and CPU results then move where tests sit close to their bounds.
// backward: one team per block of kRowsPerTeam rows, its threads over the d columns. Row by row, the
// team reduces gx = sum_j dy w x, updates the dx row, and adds dy x rstd into the block's own partial
// dw row (each thread always visits the same columns, so the partial row needs no atomics); the teams
// that finish last add the partials block by block in the same launch (kernels/column_sum_tickets.hpp).
// One pass over x and dy and no atomics on values: for a given team size (one thread on Serial) the
// order of every sum is fixed, so results are deterministic.
// On a GPU the rows move in 16-byte packs and each row has a warp (forward_warp_rows, backward_warp_rows):
// the row's sum is a shuffle reduction, not a synchronisation of the team per row.
#include "kernels/rmsnorm.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/bf16_pack.hpp"
#include "kernels/column_sum_tickets.hpp"
#include "kernels/math.hpp"
#include "kernels/kernel_scratch.hpp"

namespace shardft {

namespace {
using Team = TeamLaunch;
using Member = Team::member_type;
// Backward's rows per team on the host: a team is a thread, and few partial dw rows stay in cache.
constexpr std::int64_t kRowsPerTeam = 64;
constexpr int kForwardRows = 4;

// The sums of squares of a forward block's rows, reduced over the team as one value (Kokkos::Sum).
struct RowSums {
  float v[kForwardRows];
  KOKKOS_INLINE_FUNCTION RowSums() {
    for (int k = 0; k < kForwardRows; ++k) v[k] = 0.f;
  }
  KOKKOS_INLINE_FUNCTION RowSums& operator+=(const RowSums& o) {
    for (int k = 0; k < kForwardRows; ++k) v[k] += o.v[k];
    return *this;
  }
#if KOKKOS_VERSION < 40000
  KOKKOS_INLINE_FUNCTION void operator+=(const volatile RowSums& o) volatile {  // Kokkos 3's volatile join
    for (int k = 0; k < kForwardRows; ++k) v[k] += o.v[k];
  }
#endif
};
}  // namespace
}  // namespace shardft

namespace Kokkos {
template <>
struct reduction_identity<shardft::RowSums> {
  KOKKOS_FORCEINLINE_FUNCTION static shardft::RowSums sum() { return shardft::RowSums(); }
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
// A GPU reads and writes the rows in packs of W (4: 16-byte fp32 and 8-byte bf16 accesses) where every
// pointer allows (packs_fit), else W = 1: the memory-level parallelism one access per element lacks.
constexpr int kPack = 4, kWarpRows = 8, kLanes = 32;

// On the host (W = 1): a block of kForwardRows rows in three plain loops per row. Keep's copy of the
// stream, then y, are loops the compiler vectorises; between them the sums of squares, one fp32 chain per
// row in column order (the order Serial's one-thread team has always summed in), the block's chains
// interleaved. forward_packed_rows' team body, with its row pointers and per-element branches, runs scalar
// on the host at several times this cost. X: fp32, or bf16 (a bf16 step's stream, which Keep copies into
// x_kept), read into fp32.
template <class X, class Out, class WT, bool Keep>
void forward_rows_on_host(const char* name, Unmanaged2<const X> x, Unmanaged1<const WT> w, float eps,
                          Unmanaged2<Out> y, Unmanaged1<float> rstd, bf16* x_kept) {
  const int d = static_cast<int>(x.extent(1));
  const std::int64_t rows = static_cast<std::int64_t>(x.extent(0));
  const WT* wp = w.data();
  Kokkos::parallel_for(
      name, Range(0, (rows + kForwardRows - 1) / kForwardRows), KOKKOS_LAMBDA(const std::int64_t blk) {
        const std::int64_t n0 = blk * kForwardRows;
        const int nr = rows - n0 < kForwardRows ? static_cast<int>(rows - n0) : kForwardRows;
        const X* xr[kForwardRows];
        for (int k = 0; k < kForwardRows; ++k) xr[k] = &x(n0 + (k < nr ? k : nr - 1), 0);
        bf16* const kept_out = x_kept;  // named before the constexpr branch (nvcc's extended lambdas)
        const int cols = d;
        if constexpr (Keep) {
          for (int k = 0; k < nr && kept_out != nullptr; ++k) std::copy(xr[k], xr[k] + cols, kept_out + (n0 + k) * cols);
        }
        float p[kForwardRows] = {0.f, 0.f, 0.f, 0.f};
        for (int j = 0; j < d; ++j) {
          for (int k = 0; k < kForwardRows; ++k) {
            const float v = static_cast<float>(xr[k][j]);
            p[k] += v * v;
          }
        }
        for (int k = 0; k < nr; ++k) {
          const float r = 1.f / kmath::sqrt(p[k] / d + eps);
          rstd(n0 + k) = r;
          const X* __restrict__ xn = xr[k];
          Out* __restrict__ yn = &y(n0 + k, 0);
          for (int j = 0; j < d; ++j) {
            float v, wv;
            load_floats<1>(wp + j, &wv);
            v = wv * (static_cast<float>(xn[j]) * r);
            store_floats<1>(yn + j, &v);
          }
        }
      });
}

// Forward: one team per block of kForwardRows rows, each thread over packs of W columns of every row of
// the block. A last block of fewer rows reads its last row again in the missing slots (and stores
// nothing for them): no branch in the loop. Keep: the first pass copies x (a bf16 stream) into x_kept.
template <class X, class Out, class WT, int W, bool Keep = false>
void forward_packed_rows(const char* name, Unmanaged2<const X> x, Unmanaged1<const WT> w, float eps,
                         Unmanaged2<Out> y, Unmanaged1<float> rstd, bf16* x_kept = nullptr) {
  if constexpr (!kComputeOnDevice && W == 1) {
    forward_rows_on_host<X, Out, WT, Keep>(name, x, w, eps, y, rstd, x_kept);
    return;
  }
  const int d = static_cast<int>(x.extent(1)), groups = d / W;
  const std::int64_t rows = static_cast<std::int64_t>(x.extent(0));
  const int blocks = static_cast<int>((rows + kForwardRows - 1) / kForwardRows);
  const WT* wp = w.data();
  const auto body = KOKKOS_LAMBDA(const Member& m) {
    const std::int64_t n0 = static_cast<std::int64_t>(m.league_rank()) * kForwardRows;
    const int nr = rows - n0 < kForwardRows ? static_cast<int>(rows - n0) : kForwardRows;
    const X* xr[kForwardRows];
    for (int k = 0; k < kForwardRows; ++k) xr[k] = &x(n0 + (k < nr ? k : nr - 1), 0);
    const int threads = m.team_size();
    bf16* const kept_out = x_kept;  // named before the constexpr branch (nvcc's extended lambdas)
    const std::int64_t cols = d;
    RowSums sums;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(m, threads),
        [&](const int t, RowSums& s) {
          float p[kForwardRows] = {0.f, 0.f, 0.f, 0.f};
          for (int g = t; g < groups; g += threads) {
            for (int k = 0; k < kForwardRows; ++k) {
              float v[W];
              load_floats<W>(xr[k] + g * W, v);
              if constexpr (Keep) {
                if (k < nr && kept_out != nullptr) store_floats<W>(kept_out + (n0 + k) * cols + g * W, v);
              }
              for (int e = 0; e < W; ++e) p[k] += v[e] * v[e];
            }
          }
          for (int k = 0; k < kForwardRows; ++k) s.v[k] += p[k];
        },
        Kokkos::Sum<RowSums>(sums));
    for (int k = 0; k < nr; ++k) {
      const float r = 1.f / kmath::sqrt(sums.v[k] / d + eps);
      Kokkos::single(Kokkos::PerTeam(m), [&] { rstd(n0 + k) = r; });
      const X* xn = xr[k];
      Out* yn = &y(n0 + k, 0);
      Kokkos::parallel_for(Kokkos::TeamThreadRange(m, groups), [&](const int g) {
        float v[W], wv[W];
        load_floats<W>(xn + g * W, v);
        load_floats<W>(wp + g * W, wv);
        for (int e = 0; e < W; ++e) v[e] = wv[e] * (v[e] * r);
        store_floats<W>(yn + g * W, v);
      });
    }
  };
  // Packs of four: two or more per thread and row (forward_team_size keeps four columns per thread).
  Kokkos::parallel_for(name, Team(blocks, forward_team_size(blocks, W == 1 ? d : 2 * groups, body)), body);
}

// Lane `lane` of a row's warp visits the row's packs g = lane, lane + kLanes, ... in that order, B at a
// time: load(b, g) for the batch's packs, then use(b, g) for them. The batch's loads are then in flight
// together; one load, use and store per pack in turn would leave one load in flight per lane, since a
// store that may alias the next load's row orders the two. The order of every sum stays the pack order.
// B = 8 packs in the forward (one row's x, then x and w), 4 in the backward (x, dy and dx held).
template <int B, class Load, class Use>
KOKKOS_INLINE_FUNCTION void lane_packs_in_batches(int lane, int groups, Load&& load, Use&& use) {
  for (int g0 = lane; g0 < groups; g0 += B * kLanes) {
    for (int b = 0; b < B; ++b) {
      if (g0 + b * kLanes < groups) load(b, g0 + b * kLanes);
    }
    for (int b = 0; b < B; ++b) {
      if (g0 + b * kLanes < groups) use(b, g0 + b * kLanes);
    }
  }
}
constexpr int kForwardBatch = 8, kBackwardBatch = 4, kDwBatch = 4;

// Forward on a GPU: one warp per row (its lanes over the row's packs, lane_packs_in_batches), kWarpRows
// rows per team, like the backward below. The row's sum of squares is a warp reduction (shuffles), so no
// warp waits for a team barrier, and a team's rows go independently: the team-wide reduction of
// forward_packed_rows kept every thread of a block waiting for the slowest row. The second pass reads
// the row again from cache. Keep: as forward_packed_rows (x copied into x_kept by the first pass).
template <class X, class Out, class WT, int W, bool Keep = false>
void forward_warp_rows(const char* name, Unmanaged2<const X> x, Unmanaged1<const WT> w, float eps,
                       Unmanaged2<Out> y, Unmanaged1<float> rstd, bf16* x_kept = nullptr) {
  const int d = static_cast<int>(x.extent(1)), groups = d / W;
  const std::int64_t rows = static_cast<std::int64_t>(x.extent(0));
  const int teams = static_cast<int>((rows + kWarpRows - 1) / kWarpRows);
  const WT* wp = w.data();
  Kokkos::parallel_for(
      name, Team(teams, kWarpRows, kLanes), KOKKOS_LAMBDA(const Member& m) {
        const std::int64_t n0 = static_cast<std::int64_t>(m.league_rank()) * kWarpRows;
        const int nr = rows - n0 < kWarpRows ? static_cast<int>(rows - n0) : kWarpRows;
        bf16* const kept_out = x_kept;  // named before the constexpr branch (nvcc's extended lambdas)
        const std::int64_t cols = d;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, nr), [&](const int k) {
          const std::int64_t n = n0 + k;
          const X* xn = &x(n, 0);
          float ss = 0.f;
          Kokkos::parallel_reduce(
              Kokkos::ThreadVectorRange(m, kLanes),
              [&](const int lane, float& acc) {
                float v[kForwardBatch][W];
                lane_packs_in_batches<kForwardBatch>(
                    lane, groups, [&](int b, int g) { load_floats<W>(xn + g * W, v[b]); },
                    [&](int b, int g) {
                      if constexpr (Keep) {
                        if (kept_out != nullptr) store_floats<W>(kept_out + n * cols + g * W, v[b]);
                      }
                      for (int e = 0; e < W; ++e) acc += v[b][e] * v[b][e];
                    });
              },
              ss);
          const float r = 1.f / kmath::sqrt(ss / d + eps);
          Kokkos::single(Kokkos::PerThread(m), [&] { rstd(n) = r; });
          Out* yn = &y(n, 0);
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(m, kLanes), [&](const int lane) {
            float v[kForwardBatch][W], wv[kForwardBatch][W];
            lane_packs_in_batches<kForwardBatch>(
                lane, groups,
                [&](int b, int g) {
                  load_floats<W>(xn + g * W, v[b]);
                  load_floats<W>(wp + g * W, wv[b]);
                },
                [&](int b, int g) {
                  float out[W];
                  for (int e = 0; e < W; ++e) out[e] = wv[b][e] * (v[b][e] * r);
                  store_floats<W>(yn + g * W, out);
                });
          });
        });
      });
}

// Backward on a GPU: one warp per row (its lanes over the row's packs, lane_packs_in_batches), kWarpRows
// rows per team. The row's gx = sum_j dy w x is a warp reduction (shuffles, no team synchronisation) and
// the warp updates its dx row; after one team barrier the team's threads and lanes take the packs of
// columns and sum the block's rows in order into its partial dw row (reading dy and x again, from cache).
template <class X, class DY, class WT, int W>
void backward_warp_rows(const char* name, Unmanaged2<const X> x, Unmanaged1<const WT> w,
                        Unmanaged1<const float> rstd, Unmanaged2<const DY> dy, Unmanaged2<float> dx,
                        Unmanaged2<bf16> dx_rounded, Unmanaged2<float> partial, const ColumnSumTickets& dw_sums) {
  const int d = static_cast<int>(x.extent(1)), groups = d / W;
  const std::int64_t rows = static_cast<std::int64_t>(x.extent(0));
  const bool rounded = dx_rounded.extent(0) > 0;
  const WT* wp = w.data();
  Kokkos::parallel_for(
      name, Team(static_cast<int>(partial.extent(0)), kWarpRows, kLanes), KOKKOS_LAMBDA(const Member& m) {
        const std::int64_t n0 = static_cast<std::int64_t>(m.league_rank()) * kWarpRows;
        const int nr = rows - n0 < kWarpRows ? static_cast<int>(rows - n0) : kWarpRows;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, nr), [&](const int k) {
          const std::int64_t n = n0 + k;
          const X* xn = &x(n, 0);
          const DY* dyn = &dy(n, 0);
          float gx = 0.f;
          Kokkos::parallel_reduce(
              Kokkos::ThreadVectorRange(m, kLanes),
              [&](const int lane, float& acc) {
                float xv[kBackwardBatch][W], dv[kBackwardBatch][W];
                lane_packs_in_batches<kBackwardBatch>(
                    lane, groups,
                    [&](int b, int g) {
                      load_floats<W>(xn + g * W, xv[b]);
                      load_floats<W>(dyn + g * W, dv[b]);
                    },
                    [&](int b, int g) {
                      float wv[W];
                      load_floats<W>(wp + g * W, wv);
                      for (int e = 0; e < W; ++e) acc += dv[b][e] * wv[e] * xv[b][e];
                    });
              },
              gx);
          const float r = rstd(n), c = r * r * r * gx / d;
          float* dxn = &dx(n, 0);
          bf16* dx16 = rounded ? &dx_rounded(n, 0) : nullptr;
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(m, kLanes), [&](const int lane) {
            float xv[kBackwardBatch][W], dv[kBackwardBatch][W], out[kBackwardBatch][W];
            lane_packs_in_batches<kBackwardBatch>(
                lane, groups,
                [&](int b, int g) {
                  load_floats<W>(xn + g * W, xv[b]);
                  load_floats<W>(dyn + g * W, dv[b]);
                  load_floats<W>(dxn + g * W, out[b]);
                },
                [&](int b, int g) {
                  float wv[W];
                  load_floats<W>(wp + g * W, wv);
                  for (int e = 0; e < W; ++e) out[b][e] += r * dv[b][e] * wv[e] - c * xv[b][e];
                  store_floats<W>(dxn + g * W, out[b]);
                  if (dx16 != nullptr) store_floats<W>(dx16 + g * W, out[b]);
                });
          });
        });
        m.team_barrier();
        float* acc = &partial(m.league_rank(), 0);
        Kokkos::parallel_for(Kokkos::TeamVectorRange(m, groups), [&](const int g) {
          float sum[W];
          for (int e = 0; e < W; ++e) sum[e] = 0.f;
          // The block's rows kDwBatch at a time: their loads in flight together, then added in row order.
          for (int k0 = 0; k0 < nr; k0 += kDwBatch) {
            float xv[kDwBatch][W], dv[kDwBatch][W], r[kDwBatch];
            for (int b = 0; b < kDwBatch; ++b) {
              if (k0 + b < nr) {
                load_floats<W>(&x(n0 + k0 + b, 0) + g * W, xv[b]);
                load_floats<W>(&dy(n0 + k0 + b, 0) + g * W, dv[b]);
                r[b] = rstd(n0 + k0 + b);
              }
            }
            for (int b = 0; b < kDwBatch; ++b) {
              if (k0 + b < nr) {
                for (int e = 0; e < W; ++e) sum[e] += dv[b][e] * xv[b][e] * r[b];
              }
            }
          }
          store_floats<W>(acc + g * W, sum);
        });
        close_column_sums(m, dw_sums);
      });
}

template <class X, class DY, class WT>
void backward_on_device(const char* name, Unmanaged2<const X> x, Unmanaged1<const WT> w,
                        Unmanaged1<const float> rstd, Unmanaged2<const DY> dy, Unmanaged2<float> dx,
                        Unmanaged2<bf16> dx_rounded, Unmanaged2<float> partial, const ColumnSumTickets& dw_sums) {
  const std::int64_t d = static_cast<std::int64_t>(x.extent(1));
  const bool fits =
      packs_fit<kPack>(d, {{x.data(), static_cast<int>(sizeof(X))}, {w.data(), static_cast<int>(sizeof(WT))},
                           {dy.data(), static_cast<int>(sizeof(DY))}, {dx.data(), 4}, {dx_rounded.data(), 2},
                           {partial.data(), 4}});
  if (fits) {
    backward_warp_rows<X, DY, WT, kPack>(name, x, w, rstd, dy, dx, dx_rounded, partial, dw_sums);
  } else {
    backward_warp_rows<X, DY, WT, 1>(name, x, w, rstd, dy, dx, dx_rounded, partial, dw_sums);
  }
}

// y in fp32 or, for a bf16 GEMM input, in bf16: each element w x rstd in fp32, then stored (rounded once).
template <class Out, class WT>
void rmsnorm_forward_rows(const char* name, Unmanaged2<const float> x, Unmanaged1<const WT> w, float eps,
                          Unmanaged2<Out> y, Unmanaged1<float> rstd) {
  const int d = static_cast<int>(x.extent(1));
  const std::int64_t rows = static_cast<std::int64_t>(x.extent(0));
  if (w.extent(0) != x.extent(1) || y.extent(0) != x.extent(0) || y.extent(1) != x.extent(1) ||
      rstd.extent(0) != x.extent(0)) {
    throw std::invalid_argument(std::string(name) + ": shapes do not match");
  }
  if (rows == 0) return;
  // Packs of four on a GPU where the rows allow; the host reads element by element (W = 1: each row
  // summed j = 0, 1, ... per thread, as it always was).
  const bool packed = kComputeOnDevice && packs_fit<kPack>(static_cast<std::int64_t>(d),
                                                    {{x.data(), 4}, {w.data(), static_cast<int>(sizeof(WT))},
                                                     {y.data(), static_cast<int>(sizeof(Out))}});
  if (packed) {
    forward_warp_rows<float, Out, WT, kPack>(name, x, w, eps, y, rstd);
  } else {
    forward_packed_rows<float, Out, WT, 1>(name, x, w, eps, y, rstd);
  }
}

template <class WT>
void forward_keeping(Unmanaged2<const bf16> x, Unmanaged2<bf16> x_kept, Unmanaged1<const WT> w, float eps,
                     Unmanaged2<bf16> y, Unmanaged1<float> rstd) {
  const int d = static_cast<int>(x.extent(1));
  const std::int64_t rows = static_cast<std::int64_t>(x.extent(0));
  if (w.extent(0) != x.extent(1) || y.extent(0) != x.extent(0) || y.extent(1) != x.extent(1) ||
      (x_kept.extent(0) > 0 && (x_kept.extent(0) != x.extent(0) || x_kept.extent(1) != x.extent(1))) ||
      rstd.extent(0) != x.extent(0)) {
    throw std::invalid_argument("rmsnorm_forward_keeping: shapes do not match");
  }
  if (rows == 0) return;
  const bool packed = kComputeOnDevice && packs_fit<kPack>(static_cast<std::int64_t>(d),
                                                    {{x.data(), 2}, {w.data(), static_cast<int>(sizeof(WT))},
                                                     {y.data(), 2}, {x_kept.data(), 2}});
  if (packed) {
    forward_warp_rows<bf16, bf16, WT, kPack, true>("rmsnorm_forward_keeping_bf16", x, w, eps, y, rstd, x_kept.data());
  } else {
    forward_packed_rows<bf16, bf16, WT, 1, true>("rmsnorm_forward_keeping_bf16", x, w, eps, y, rstd, x_kept.data());
  }
}
}  // namespace

void rmsnorm_forward_keeping(Unmanaged2<const bf16> x, Unmanaged2<bf16> x_kept, const NormWeight& w, float eps,
                             Unmanaged2<bf16> y, Unmanaged1<float> rstd) {
  w.visit([&](auto wv) { forward_keeping(x, x_kept, wv, eps, y, rstd); });
}

void rmsnorm_forward(Unmanaged2<const float> x, const NormWeight& w, float eps, Unmanaged2<float> y,
                     Unmanaged1<float> rstd) {
  w.visit([&](auto wv) { rmsnorm_forward_rows("rmsnorm_forward", x, wv, eps, y, rstd); });
}

void rmsnorm_forward(Unmanaged2<const float> x, const NormWeight& w, float eps, Unmanaged2<bf16> y,
                     Unmanaged1<float> rstd) {
  w.visit([&](auto wv) { rmsnorm_forward_rows("rmsnorm_forward_bf16", x, wv, eps, y, rstd); });
}

namespace {
// x and dy in fp32 or bf16 (a bf16 step's kept residual stream; the bf16 gradient its dgrad GEMMs write),
// read into fp32 registers: the same float operations either way, so bf16 gives what its fp32 widening gives.
template <class X, class DY, class WT>
void rmsnorm_backward_rows(const char* name, Unmanaged2<const X> x, Unmanaged1<const WT> w,
                           Unmanaged1<const float> rstd, Unmanaged2<const DY> dy, Unmanaged2<float> dx,
                           Unmanaged1<float> dw, Unmanaged2<bf16> dx_rounded, bool overwrite_dw) {
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
  if (rows == 0) {
    if (overwrite_dw && dw.extent(0) > 0) Kokkos::deep_copy(ExecSpace(), dw, 0.f);  // no rows: a zero sum
    return;
  }
  if constexpr (kComputeOnDevice) {
    const auto partial = kernel_scratch<float>("rmsnorm_dw_partial", (rows + kWarpRows - 1) / kWarpRows, d);
    // An empty dw (a frozen norm weight, LoRA) is not summed.
    backward_on_device(name, x, w, rstd, dy, dx, dx_rounded, partial,
                       column_sum_tickets("rmsnorm_dw", partial, dw, overwrite_dw));
    return;
  }
  const int blocks = static_cast<int>((rows + kRowsPerTeam - 1) / kRowsPerTeam);
  const auto partial = kernel_scratch<float>("rmsnorm_dw_partial", blocks, d);
  const ColumnSumTickets dw_sums = column_sum_tickets("rmsnorm_dw", partial, dw, overwrite_dw);
  Kokkos::parallel_for(
      name, Team(blocks, Kokkos::AUTO), KOKKOS_LAMBDA(const Member& m) {
        const int blk = m.league_rank(), threads = m.team_size();
        float* acc = &partial(blk, 0);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, d), [&](const int j) { acc[j] = 0.f; });
        const std::int64_t n0 = blk * kRowsPerTeam, n1 = n0 + kRowsPerTeam < rows ? n0 + kRowsPerTeam : rows;
        for (std::int64_t n = n0; n < n1; ++n) {
          const X* xn = &x(n, 0);
          const DY* dyn = &dy(n, 0);
          float* dxn = &dx(n, 0);
          bf16* dx16 = rounded ? &dx_rounded(n, 0) : nullptr;
          // Each thread sums its strided share of the row (coalesced on a GPU) in four locals: a reduction
          // straight over TeamThreadRange(m, d) keeps its accumulator in memory on the host backends, and
          // one float accumulator is a chain of dependent adds. On one core the whole backward then runs
          // 1.5x faster than the one-thread-per-block loop it replaces at d = 1024 (as fast at d = 128).
          float gx = 0.f;
          // g[j] x[j] = dy[j] w[j] x[j] in fp32
          auto gx_term = [&](int j) {
            return static_cast<float>(dyn[j]) * static_cast<float>(w(j)) * static_cast<float>(xn[j]);
          };
          Kokkos::parallel_reduce(
              Kokkos::TeamThreadRange(m, threads),
              [&](const int t, float& s) {
                float p0 = 0.f, p1 = 0.f, p2 = 0.f, p3 = 0.f;
                int j = t;
                for (; j + 3 * threads < d; j += 4 * threads) {
                  p0 += gx_term(j);
                  p1 += gx_term(j + threads);
                  p2 += gx_term(j + 2 * threads);
                  p3 += gx_term(j + 3 * threads);
                }
                for (; j < d; j += threads) p0 += gx_term(j);
                s += (p0 + p1) + (p2 + p3);
              },
              gx);
          const float r = rstd(n);
          const float c = r * r * r * gx / d;
          Kokkos::parallel_for(Kokkos::TeamThreadRange(m, d), [&](const int j) {
            const float xj = static_cast<float>(xn[j]), dyj = static_cast<float>(dyn[j]);
            const float dxj = dxn[j] + (r * dyj * static_cast<float>(w(j)) - c * xj);
            dxn[j] = dxj;
            if (dx16 != nullptr) dx16[j] = bf16(dxj);
            acc[j] += dyj * xj * r;
          });
        }
        close_column_sums(m, dw_sums);
      });
}
}  // namespace

namespace {
// The host's backward reads w(j) inside its row sums, where a bf16 conversion changes how the compiler
// contracts and vectorizes them (1-ulp differences from fp32 weights of the same values): on the host a
// bf16 weight is widened by a plain loop (no launch: host memory) into scratch and the fp32 code runs, so
// both give the same bits. A GPU reads the weights through load_floats into registers either way.
template <class F>
void with_backward_weight(const NormWeight& w, F&& f) {
  if constexpr (!kComputeOnDevice) {
    if (w.is_bf16) {
      const auto wide = kernel_scratch<float>("rmsnorm_weight_widened", w.size());
      for (std::size_t j = 0; j < w.size(); ++j) wide(j) = static_cast<float>(w.b16(j));
      f(Unmanaged1<const float>(wide));
      return;
    }
  }
  w.visit(f);
}

// A bf16 dy as the backward reads it: on a GPU as it is (widened in registers); on the host widened by a
// plain loop into scratch, for the reason with_backward_weight gives, so it gives the fp32 code's bits.
template <class F>
void with_backward_grad(Unmanaged2<const bf16> dy, F&& f) {
  if constexpr (!kComputeOnDevice) {
    const auto wide = kernel_scratch<float>("rmsnorm_grad_widened", dy.extent(0), dy.extent(1));
    for (std::size_t i = 0; i < dy.extent(0); ++i) {
      for (std::size_t j = 0; j < dy.extent(1); ++j) wide(i, j) = static_cast<float>(dy(i, j));
    }
    f(Unmanaged2<const float>(wide));
  } else {
    f(dy);
  }
}

// rmsnorm_backward_rows with the weight (and a bf16 dy) as the host or the device reads them.
template <class X, class DY>
void backward_with(const char* name, Unmanaged2<const X> x, const NormWeight& w, Unmanaged1<const float> rstd,
                   Unmanaged2<const DY> dy, Unmanaged2<float> dx, Unmanaged1<float> dw, Unmanaged2<bf16> dx_rounded,
                   bool overwrite_dw) {
  auto run = [&](auto dyv) {
    with_backward_weight(w, [&](auto wv) {
      rmsnorm_backward_rows(name, x, wv, rstd, dyv, dx, dw, dx_rounded, overwrite_dw);
    });
  };
  if constexpr (std::is_same_v<DY, bf16>) {
    with_backward_grad(dy, run);
  } else {
    run(dy);
  }
}
}  // namespace

void rmsnorm_backward(Unmanaged2<const float> x, const NormWeight& w, Unmanaged1<const float> rstd,
                      Unmanaged2<const float> dy, Unmanaged2<float> dx, Unmanaged1<float> dw,
                      Unmanaged2<bf16> dx_rounded, bool overwrite_dw) {
  backward_with("rmsnorm_backward_rows", x, w, rstd, dy, dx, dw, dx_rounded, overwrite_dw);
}

void rmsnorm_backward(Unmanaged2<const bf16> x, const NormWeight& w, Unmanaged1<const float> rstd,
                      Unmanaged2<const float> dy, Unmanaged2<float> dx, Unmanaged1<float> dw,
                      Unmanaged2<bf16> dx_rounded, bool overwrite_dw) {
  backward_with("rmsnorm_backward_rows_bf16", x, w, rstd, dy, dx, dw, dx_rounded, overwrite_dw);
}

void rmsnorm_backward(Unmanaged2<const float> x, const NormWeight& w, Unmanaged1<const float> rstd,
                      Unmanaged2<const bf16> dy, Unmanaged2<float> dx, Unmanaged1<float> dw,
                      Unmanaged2<bf16> dx_rounded, bool overwrite_dw) {
  backward_with("rmsnorm_backward_rows_bf16_grad", x, w, rstd, dy, dx, dw, dx_rounded, overwrite_dw);
}

void rmsnorm_backward(Unmanaged2<const bf16> x, const NormWeight& w, Unmanaged1<const float> rstd,
                      Unmanaged2<const bf16> dy, Unmanaged2<float> dx, Unmanaged1<float> dw,
                      Unmanaged2<bf16> dx_rounded, bool overwrite_dw) {
  backward_with("rmsnorm_backward_rows_bf16_bf16_grad", x, w, rstd, dy, dx, dw, dx_rounded, overwrite_dw);
}

}  // namespace shardft
