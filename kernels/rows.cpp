#include "kernels/rows.hpp"

#include <stdexcept>

namespace shardft {

namespace {
using Team = Kokkos::TeamPolicy<ExecSpace>;
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

void add_column_sums(Unmanaged2<const float> partial, Unmanaged1<float> out) {
  if (partial.extent(1) != out.extent(0)) throw std::invalid_argument("add_column_sums: shapes do not match");
  const std::int64_t blocks = static_cast<std::int64_t>(partial.extent(0));
  // A column's few partials (rows / block size of them) in one thread: the order is fixed, and the
  // columns alone fill a GPU at model widths.
  Kokkos::parallel_for(
      "add_column_sums", Range(0, static_cast<std::int64_t>(out.extent(0))), KOKKOS_LAMBDA(const std::int64_t j) {
        float sum = 0.f;
        for (std::int64_t b = 0; b < blocks; ++b) sum += partial(b, j);
        out(j) += sum;
      });
}

}  // namespace shardft
