#include "kernels/rows.hpp"

#include <stdexcept>

namespace shardft {

namespace {
using Team = TeamLaunch;
using Member = Team::member_type;
}  // namespace

void gather_rows(Unmanaged2<const float> src, Unmanaged1<const std::int32_t> rows, Unmanaged2<float> dst) {
  if (src.extent(1) != dst.extent(1) || rows.extent(0) != dst.extent(0)) {
    throw std::invalid_argument("gather_rows: shapes do not match");
  }
  const int c = static_cast<int>(src.extent(1));
  Kokkos::parallel_for(
      "gather_rows", Team(static_cast<int>(dst.extent(0)), Kokkos::AUTO), KOKKOS_LAMBDA(const Member& m) {
        const int r = m.league_rank();
        const std::int32_t from = rows(r);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, c), [&](const int j) { dst(r, j) = src(from, j); });
      });
}

void gather_rows(Unmanaged2<const bf16> src, Unmanaged1<const std::int32_t> rows, Unmanaged2<float> dst) {
  if (src.extent(1) != dst.extent(1) || rows.extent(0) != dst.extent(0)) {
    throw std::invalid_argument("gather_rows: shapes do not match");
  }
  const int c = static_cast<int>(src.extent(1));
  Kokkos::parallel_for(
      "gather_rows_bf16", Team(static_cast<int>(dst.extent(0)), Kokkos::AUTO), KOKKOS_LAMBDA(const Member& m) {
        const int r = m.league_rank();
        const std::int32_t from = rows(r);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, c),
                             [&](const int j) { dst(r, j) = static_cast<float>(src(from, j)); });
      });
}

void gather_rows(Unmanaged2<const bf16> src, Unmanaged1<const std::int32_t> rows, Unmanaged2<bf16> dst) {
  if (src.extent(1) != dst.extent(1) || rows.extent(0) != dst.extent(0)) {
    throw std::invalid_argument("gather_rows: shapes do not match");
  }
  const int c = static_cast<int>(src.extent(1));
  Kokkos::parallel_for(
      "gather_rows_bf16_to_bf16", Team(static_cast<int>(dst.extent(0)), Kokkos::AUTO), KOKKOS_LAMBDA(const Member& m) {
        const int r = m.league_rank();
        const std::int32_t from = rows(r);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, c), [&](const int j) { dst(r, j) = src(from, j); });
      });
}

void scatter_rows(Unmanaged2<const float> src, Unmanaged1<const std::int64_t> dest, Unmanaged2<float> dst) {
  if (src.extent(1) != dst.extent(1) || dest.extent(0) != src.extent(0)) {
    throw std::invalid_argument("scatter_rows: shapes do not match");
  }
  const int c = static_cast<int>(src.extent(1));
  Kokkos::parallel_for(
      "scatter_rows", Team(static_cast<int>(src.extent(0)), Kokkos::AUTO), KOKKOS_LAMBDA(const Member& m) {
        const int n = m.league_rank();
        const std::int64_t to = dest(n);
        if (to < 0) return;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, c), [&](const int j) { dst(to, j) = src(n, j); });
      });
}

}  // namespace shardft
