// SwiGLU, elementwise over [N, I] (formulas in swiglu.hpp). Every kernel runs one team per row with its
// threads over the I columns: all N * I elements are spread over the GPU's threads, neighbouring threads
// on neighbouring elements (coalesced loads and stores), and no per-element index division (a flat
// range over N * I would need i / I and i % I for the packed rows). Serial runs a team as one thread: a
// plain loop along each row, which the compiler vectorises (the exp is kernels/gate_exp.hpp's, no call),
// except where the host has AVX-512 BF16: there kernels/avx512_swiglu.hpp's rows run (on_avx512_rows).
#include "kernels/swiglu.hpp"

#include "kernels/avx512_swiglu.hpp"
#include "kernels/gate_exp.hpp"
#include "kernels/swiglu_host_rows.hpp"

namespace shardft {

namespace {
using Team = TeamLaunch;
using Member = Team::member_type;

Team one_team_per_row(std::size_t rows) { return Team(static_cast<int>(rows), Kokkos::AUTO); }

// op(j) for every column j of one row, over the team's threads: on a GPU neighbouring threads on
// neighbouring columns (coalesced); on the host a contiguous span per thread, a plain loop that the
// compiler vectorises (TeamThreadRange's loop steps by a stride it cannot see).
template <class Op>
KOKKOS_INLINE_FUNCTION void for_each_column(const Member& m, int cols, const Op& op) {
  if constexpr (kComputeOnDevice) {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(m, cols), op);
  } else {
    const int threads = m.team_size(), span = (cols + threads - 1) / threads;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(m, threads), [&](const int t) {
      const int end = (t + 1) * span < cols ? (t + 1) * span : cols;
      const Op each = op;  // a local copy: its pointers stay in registers, apart from what the loop stores
      for (int j = t * span; j < end; ++j) each(j);
    });
  }
}
}  // namespace

using swiglu_detail::on_avx512_rows;

void swiglu_forward(Unmanaged2<const float> g, Unmanaged2<const float> u, Unmanaged2<float> s) {
  const int cols = static_cast<int>(g.extent(1));
  if (on_avx512_rows("swiglu_forward", g.extent(0), [=](std::int64_t n) {
        avx512::swiglu_forward_row(g.data() + n * g.stride_0(), u.data() + n * u.stride_0(),
                                   s.data() + n * s.stride_0(), cols);
      })) {
    return;
  }
  Kokkos::parallel_for(
      "swiglu_forward", one_team_per_row(g.extent(0)), KOKKOS_LAMBDA(const Member& m) {
        const int n = m.league_rank();
        for_each_column(m, cols, [=](const int j) {
          const float x = g(n, j);
          s(n, j) = x / (1.f + kmath::gate_exp(-x)) * u(n, j);
        });
      });
}

void swiglu_backward(Unmanaged2<const float> g, Unmanaged2<const float> u, Unmanaged2<const float> ds,
                     Unmanaged2<float> dg, Unmanaged2<float> du) {
  const int cols = static_cast<int>(g.extent(1));
  if (on_avx512_rows("swiglu_backward", g.extent(0), [=](std::int64_t n) {
        avx512::swiglu_backward_row(g.data() + n * g.stride_0(), u.data() + n * u.stride_0(),
                                    ds.data() + n * ds.stride_0(), dg.data() + n * dg.stride_0(),
                                    du.data() + n * du.stride_0(), cols);
      })) {
    return;
  }
  Kokkos::parallel_for(
      "swiglu_backward", one_team_per_row(g.extent(0)), KOKKOS_LAMBDA(const Member& m) {
        const int n = m.league_rank();
        for_each_column(m, cols, [=](const int j) {
          const float x = g(n, j);
          const float sig = 1.f / (1.f + kmath::gate_exp(-x));
          du(n, j) = ds(n, j) * x * sig;
          dg(n, j) = ds(n, j) * u(n, j) * sig * (1.f + x * (1.f - sig));
        });
      });
}

}  // namespace shardft

namespace shardft {

void swiglu_forward_packed(Unmanaged2<const float> gu, Unmanaged2<float> s) {
  const int cols = static_cast<int>(s.extent(1));
  if (on_avx512_rows("swiglu_forward_packed", s.extent(0), [=](std::int64_t n) {
        const float* g = gu.data() + n * gu.stride_0();
        avx512::swiglu_forward_row(g, g + cols, s.data() + n * s.stride_0(), cols);
      })) {
    return;
  }
  Kokkos::parallel_for(
      "swiglu_forward_packed", one_team_per_row(s.extent(0)), KOKKOS_LAMBDA(const Member& m) {
        const int n = m.league_rank();
        const float* g = &gu(n, 0);
        const float* u = g + cols;
        float* out = &s(n, 0);
        for_each_column(m, cols, [=](const int j) { out[j] = g[j] / (1.f + kmath::gate_exp(-g[j])) * u[j]; });
      });
}

void swiglu_backward_packed_inplace(Unmanaged2<float> gu, Unmanaged2<const float> ds) {
  const int cols = static_cast<int>(ds.extent(1));
  if (on_avx512_rows("swiglu_backward_packed_inplace", ds.extent(0), [=](std::int64_t n) {
        float* g = gu.data() + n * gu.stride_0();
        avx512::swiglu_backward_row(g, g + cols, ds.data() + n * ds.stride_0(), g, g + cols, cols);
      })) {
    return;
  }
  Kokkos::parallel_for(
      "swiglu_backward_packed_inplace", one_team_per_row(ds.extent(0)), KOKKOS_LAMBDA(const Member& m) {
        const int n = m.league_rank();
        float* g = &gu(n, 0);
        float* u = g + cols;
        const float* d = &ds(n, 0);
        for_each_column(m, cols, [=](const int j) {
          const float x = g[j], up = u[j];
          const float sig = 1.f / (1.f + kmath::gate_exp(-x));
          u[j] = d[j] * x * sig;
          g[j] = d[j] * up * sig * (1.f + x * (1.f - sig));
        });
      });
}

}  // namespace shardft
