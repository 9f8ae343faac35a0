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

namespace {
// The host: a column's partials in one thread, b = 0, 1, ... in order.
void add_column_sums_in_order(Unmanaged2<const float> partial, Unmanaged1<float> out, bool overwrite) {
  const std::int64_t blocks = static_cast<std::int64_t>(partial.extent(0));
  Kokkos::parallel_for(
      "add_column_sums", Range(0, static_cast<std::int64_t>(out.extent(0))), KOKKOS_LAMBDA(const std::int64_t j) {
        float sum = 0.f;
        for (std::int64_t b = 0; b < blocks; ++b) sum += partial(b, j);
        out(j) = overwrite ? sum : out(j) + sum;
      });
}

// A GPU: 2048 columns are 2048 threads, too few to hide the latency of 512 dependent loads each. A team
// per 32 columns: its `slices` warps each sum every slices-th partial of the warp's 32 columns (in
// order: b = s, s + slices, ...), then the first warp adds the slices' sums s = 0, 1, ... in order.
// The order is fixed for a device, so results are deterministic (and differ from the host's in rounding
// only). Up to 32 slices (1024-thread teams, where the device allows them): hidden dimensions give few
// teams (64 at 2048), so each thread's chain of loads must be short.
constexpr int kColumnsPerTeam = 32, kMaxSlices = 32;

// One team's 32 columns (a functor, not a lambda: its slice count is chosen after asking Kokkos how many
// threads it may have).
struct ColumnSlices {
  Unmanaged2<const float> partial;
  Unmanaged1<float> out;
  std::int64_t blocks, cols;
  int slices;
  bool overwrite;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& m) const {
    float* sums = static_cast<float*>(m.team_shmem().get_shmem(sizeof(float) * kColumnsPerTeam * slices));
    const int lane = m.team_rank() % kColumnsPerTeam, slice = m.team_rank() / kColumnsPerTeam;
    const std::int64_t j = static_cast<std::int64_t>(m.league_rank()) * kColumnsPerTeam + lane;
    float sum = 0.f;
    if (j < cols) {
      for (std::int64_t b = slice; b < blocks; b += slices) sum += partial(b, j);
    }
    sums[slice * kColumnsPerTeam + lane] = sum;
    m.team_barrier();
    if (slice == 0 && j < cols) {
      float total = 0.f;
      for (int s = 0; s < slices; ++s) total += sums[s * kColumnsPerTeam + lane];
      out(j) = overwrite ? total : out(j) + total;
    }
  }
};

void add_column_sums_sliced(Unmanaged2<const float> partial, Unmanaged1<float> out, bool overwrite) {
  const std::int64_t blocks = static_cast<std::int64_t>(partial.extent(0)), cols = static_cast<std::int64_t>(out.extent(0));
  const int teams = static_cast<int>((cols + kColumnsPerTeam - 1) / kColumnsPerTeam);
  const auto shared = [](int n) { return Kokkos::PerTeam(static_cast<int>(sizeof(float)) * kColumnsPerTeam * n); };
  ColumnSlices body{partial, out, blocks, cols, kMaxSlices, overwrite};
  const int most = Team(teams, 1).set_scratch_size(0, shared(kMaxSlices)).team_size_max(body, Kokkos::ParallelForTag());
  while (body.slices > 1 && kColumnsPerTeam * body.slices > most) body.slices /= 2;
  Kokkos::parallel_for("add_column_sums", Team(teams, kColumnsPerTeam * body.slices).set_scratch_size(0, shared(body.slices)),
                       body);
}
}  // namespace

void add_column_sums(Unmanaged2<const float> partial, Unmanaged1<float> out, bool overwrite) {
  if (partial.extent(1) != out.extent(0)) throw std::invalid_argument("add_column_sums: shapes do not match");
  if constexpr (Kokkos::SpaceAccessibility<HostSpace, MemSpace>::accessible) {
    add_column_sums_in_order(partial, out, overwrite);
  } else {
    add_column_sums_sliced(partial, out, overwrite);
  }
}

}  // namespace shardft
