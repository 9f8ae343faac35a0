// Bias of a linear layer, y [N, out], b / db [out] (formulas in bias.hpp):
//   forward   y[n, j] += b[j]                one thread per element
//   backward  db[j]   += sum_n dy[n, j]      a column sum in two deterministic stages:
//     one team per block of kRowsPerTeam rows, its threads over the columns (coalesced), each summing
//     its column of the block in row order into partial[block, j]; the teams that finish last add the
//     partials block by block in the same launch (kernels/column_sum_tickets.hpp). No atomics on values:
//     the sums' order never depends on the team size or on which team finishes when.
#include "kernels/bias.hpp"

#include <stdexcept>

#include "kernels/column_sum_tickets.hpp"
#include "kernels/kernel_scratch.hpp"

namespace shardft {

namespace {
using Team = TeamLaunch;
using Member = Team::member_type;
constexpr std::int64_t kRowsPerTeam = 64;
}  // namespace

void bias_forward(Unmanaged2<float> y, Unmanaged1<const float> b) {
  if (b.extent(0) != y.extent(1)) throw std::invalid_argument("bias_forward: bias size does not match y's columns");
  const std::int64_t cols = static_cast<std::int64_t>(y.extent(1));
  // One thread per element: y[n,j] += b[j] with n = i / cols, j = i % cols.
  Kokkos::parallel_for(
      "bias_forward", Range(0, static_cast<std::int64_t>(y.extent(0)) * cols), KOKKOS_LAMBDA(const std::int64_t i) {
        y(i / cols, i % cols) += b(i % cols);
      });
}

void bias_backward(Unmanaged2<const float> dy, Unmanaged1<float> db) {
  if (db.extent(0) != dy.extent(1)) throw std::invalid_argument("bias_backward: bias size does not match dy's columns");
  const std::int64_t rows = static_cast<std::int64_t>(dy.extent(0));
  const int cols = static_cast<int>(dy.extent(1));
  if (rows == 0) return;
  const int blocks = static_cast<int>((rows + kRowsPerTeam - 1) / kRowsPerTeam);
  const auto partial = kernel_scratch<float>("bias_db_partial", blocks, cols);
  const ColumnSumTickets db_sums = column_sum_tickets("bias_db", partial, db, false);
  Kokkos::parallel_for(
      "bias_backward_rows", Team(blocks, Kokkos::AUTO), KOKKOS_LAMBDA(const Member& m) {
        const int blk = m.league_rank();
        const std::int64_t n0 = blk * kRowsPerTeam, n1 = n0 + kRowsPerTeam < rows ? n0 + kRowsPerTeam : rows;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, cols), [&](const int j) {
          float acc = 0.f;
          for (std::int64_t n = n0; n < n1; ++n) acc += dy(n, j);
          partial(blk, j) = acc;
        });
        close_column_sums(m, db_sums);
      });
}

}  // namespace shardft
