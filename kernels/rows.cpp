#include "kernels/rows.hpp"

#include <stdexcept>
#include <type_traits>

namespace shardft {

namespace {
using Team = TeamLaunch;
using Member = Team::member_type;
}  // namespace

namespace {
// An element as D: through fp32 where the types differ (bf16 -> fp32 widens exactly), as it is where not.
template <class D, class S>
KOKKOS_INLINE_FUNCTION D converted(const S& v) {
  if constexpr (std::is_same_v<S, D>) {
    return v;
  } else {
    return D(static_cast<float>(v));
  }
}

// dst(r, :) = src(rows(r), :), each element converted().
template <class S, class D>
void gather_rows_of(const char* name, Unmanaged2<const S> src, Unmanaged1<const std::int32_t> rows, Unmanaged2<D> dst) {
  if (src.extent(1) != dst.extent(1) || rows.extent(0) != dst.extent(0)) {
    throw std::invalid_argument("gather_rows: shapes do not match");
  }
  const int c = static_cast<int>(src.extent(1));
  Kokkos::parallel_for(
      name, Team(static_cast<int>(dst.extent(0)), Kokkos::AUTO), KOKKOS_LAMBDA(const Member& m) {
        const int r = m.league_rank();
        const std::int32_t from = rows(r);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, c), [&](const int j) { dst(r, j) = converted<D>(src(from, j)); });
      });
}
}  // namespace

void gather_rows(Unmanaged2<const float> src, Unmanaged1<const std::int32_t> rows, Unmanaged2<float> dst) {
  gather_rows_of("gather_rows", src, rows, dst);
}

void gather_rows(Unmanaged2<const bf16> src, Unmanaged1<const std::int32_t> rows, Unmanaged2<float> dst) {
  gather_rows_of("gather_rows_bf16", src, rows, dst);
}

void gather_rows(Unmanaged2<const bf16> src, Unmanaged1<const std::int32_t> rows, Unmanaged2<bf16> dst) {
  gather_rows_of("gather_rows_bf16_to_bf16", src, rows, dst);
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
