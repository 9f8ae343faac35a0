// kernels/column_sum_tickets.hpp: the teams that finish last sum every team's partial row, in one launch,
// in a fixed order (group by group, then the groups), and leave the counters at zero for the next launch.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "finite_difference.hpp"
#include "kernels/column_sum_tickets.hpp"
#include "kernels/kernel_scratch.hpp"

namespace shardft {

// Each team writes row b of `rows` as its partial row, then closes the sums (a kernel shaped as the
// RMSNorm backward is: partial rows first, the closing sums by the last teams).
void sum_rows_by_tickets(View2<float> rows, View1<float> out, bool overwrite, int group_size) {
  const int blocks = static_cast<int>(rows.extent(0)), cols = static_cast<int>(rows.extent(1));
  const auto partial = kernel_scratch<float>("test_ticket_partial", blocks, cols);
  const ColumnSumTickets t = column_sum_tickets("test_tickets", partial, out, overwrite, group_size);
  Kokkos::parallel_for(
      "test_sum_rows_by_tickets", TeamLaunch(blocks, Kokkos::AUTO), KOKKOS_LAMBDA(const TeamLaunch::member_type& m) {
        const int b = m.league_rank();
        Kokkos::parallel_for(Kokkos::TeamVectorRange(m, cols), [&](const int j) { partial(b, j) = rows(b, j); });
        close_column_sums(m, t);
      });
  Kokkos::fence();
}

namespace {
using namespace kernel_test;

// What the tickets must give, in float and in their order: each group's rows in order, then the groups
// in order (one group: the rows in order, added once).
std::vector<float> expected_sums(const std::vector<float>& rows, int blocks, int cols, int group_size,
                                 std::vector<float> out, bool overwrite) {
  const int groups = (blocks + group_size - 1) / group_size;
  for (int j = 0; j < cols; ++j) {
    float total = 0.f;
    for (int g = 0; g < groups; ++g) {
      float s = 0.f;
      for (int b = g * group_size; b < std::min(blocks, (g + 1) * group_size); ++b) s += rows[b * cols + j];
      total += s;  // 0 + s is s: one group adds its in-order sum once
    }
    out[j] = overwrite ? total : out[j] + total;
  }
  return out;
}

TEST(KernelColumnSumTickets, LastTeamsSumEveryRowInTheirFixedOrder) {
  const int cols = 37;
  for (const int blocks : {1, 5, 40}) {
    for (const int group_size : {1, 2, 3, 7, 40}) {
      for (const bool overwrite : {false, true}) {
        SCOPED_TRACE("blocks " + std::to_string(blocks) + ", groups of " + std::to_string(group_size) +
                     (overwrite ? ", overwrite" : ", add"));
        const auto rows = random_vector(static_cast<std::size_t>(blocks) * cols, 900 + blocks);
        const auto out0 = random_vector(cols, 901);
        auto out = to_device(out0, "out");
        sum_rows_by_tickets(to_device(rows, blocks, cols, "rows"), out, overwrite, group_size);
        const int used = std::min(group_size, blocks);
        const auto want = expected_sums(rows, blocks, cols, used, out0, overwrite);
        EXPECT_EQ(to_host(out), want);
        // The counters are back at zero: a second launch sums again (from the first one's output).
        sum_rows_by_tickets(to_device(rows, blocks, cols, "rows"), out, overwrite, group_size);
        EXPECT_EQ(to_host(out), expected_sums(rows, blocks, cols, used, want, overwrite));
      }
    }
  }
}

TEST(KernelColumnSumTickets, DefaultGroupsOnTheHostAreOneInOrderSum) {
  const int blocks = 23, cols = 11;
  const auto rows = random_vector(static_cast<std::size_t>(blocks) * cols, 910);
  const auto out0 = random_vector(cols, 911);
  auto out = to_device(out0, "out");
  sum_rows_by_tickets(to_device(rows, blocks, cols, "rows"), out, false, 0);
  // The host sums the rows b = 0, 1, ... (the order of the second kernel this replaces); a GPU in about sqrt(B) groups.
  const int group_size = kComputeOnDevice ? 5 : blocks;
  EXPECT_EQ(to_host(out), expected_sums(rows, blocks, cols, group_size, out0, false));
}

TEST(KernelColumnSumTickets, AnEmptyOutputSumsNothingAndAWrongWidthIsRefused) {
  const auto partial = kernel_scratch<float>("test_ticket_partial", 4, 6);
  const ColumnSumTickets none = column_sum_tickets("test_tickets", partial, Unmanaged1<float>(), false);
  EXPECT_EQ(none.counters.extent(0), 0u);
  View1<float> narrow("narrow", 5);
  EXPECT_THROW(column_sum_tickets("test_tickets", partial, narrow, false), std::invalid_argument);
}

}  // namespace
}  // namespace shardft
