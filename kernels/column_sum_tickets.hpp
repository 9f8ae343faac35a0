#pragma once
// The closing column sum of a kernel whose teams each write one partial row (a norm weight's or a bias's
// gradient summed over a block of rows), done in the same launch by the teams that finish last instead
// of by a second kernel over the partial rows: a launch fewer per norm in a step's backward.
//   partial [B, c]: team b's row.  out[j] += sum_b partial[b, j]  (overwrite: out[j] = the sum)
// Teams form groups of `group_size` consecutive blocks. Each team, once its row is written, takes a
// ticket from its group's counter; the team with the group's last ticket has seen every row of the group
// written and sums them in order into level2[g, :]. The team that then takes the last ticket of the
// groups' counter sums level2's rows in order into out. Every sum has a fixed order, so results are
// deterministic; with one group (the host) each column is summed b = 0, 1, ..., as the second kernel
// summed it. On a GPU about sqrt(B) groups of sqrt(B) rows each keep both closing sums short (two teams
// read a few hundred KiB from L2, where a separate launch read the whole partial), and only the last
// teams do them.
// The counters are zero before every launch: allocated zeroed, and the last teams set them back.
#include <cstdint>

#include "kernels/types.hpp"

namespace shardft {

struct ColumnSumTickets {
  Unmanaged2<const float> partial;  // [B, c]
  Unmanaged2<float> level2;         // [groups, c]; empty with one group
  Unmanaged1<int> counters;         // [groups + 1]: one per group, then the groups'
  Unmanaged1<float> out;            // [c]; empty: nothing to sum (a frozen norm weight)
  int group_size = 1;
  bool overwrite = false;
};

// Tickets for a launch of partial.extent(0) teams writing `partial`. group_size 0: the memory space's
// default (every block in one group on the host; about sqrt(B) on a GPU). Scratch and counters are kept
// under `name` (kernels/kernel_scratch.hpp): a step after the first allocates nothing.
ColumnSumTickets column_sum_tickets(const char* name, Unmanaged2<const float> partial, Unmanaged1<float> out,
                                    bool overwrite, int group_size = 0);

namespace column_sums_detail {
// After every thread of the team has written what it writes: true in the team that took the last of
// `tickets` tickets from *counter (which it sets back to zero), with every other team's writes visible.
template <class Member>
KOKKOS_INLINE_FUNCTION bool took_last_ticket(const Member& m, int* counter, int tickets) {
  Kokkos::memory_fence();  // this thread's writes before the team's ticket
  m.team_barrier();
  int ticket = 0;
  Kokkos::single(
      Kokkos::PerTeam(m), [&](int& t) { t = Kokkos::atomic_fetch_add(counter, 1); }, ticket);
  if (ticket != tickets - 1) return false;
  Kokkos::memory_fence();  // the other teams' writes before this team's reads
  Kokkos::single(Kokkos::PerTeam(m), [&]() { *counter = 0; });
  return true;
}

// Another team's write as this team reads it: on a GPU through an L2 load (ld.global.cg), not from the
// SM's own L1, which is not coherent with the other SMs' writes; host caches are coherent. Unlike the
// volatile loads of the CUDA guide's last-block sum, these may be issued back to back, so a batch of them
// is in flight at once.
KOKKOS_INLINE_FUNCTION float read_other_teams(const float* p) {
#if defined(__CUDA_ARCH__)
  return __ldcg(p);
#else
  return *p;
#endif
}

// dst[j] (+)= sum_r rows[r, j] for r = first .. first + count - 1, in that order, over the team's threads.
// Each thread sums kColumns columns g, g + G, g + 2G, ... (G = cols / kColumns rounded up: neighbouring
// threads read neighbouring columns), kRowBatch rows at a time: the batch's kColumns x kRowBatch loads are
// in flight together, then added row by row. A load, add, load, add chain waits out one L2 latency per
// row and column, and these sums are the launch's tail (only the last teams run them). Sixteen loads keep
// the RMSNorm backward at 88 to 92 registers per thread (nvcc -Xptxas -v; two blocks of 256 threads per
// SM); 32 took it past 128 (one block), and so did packs of four columns (168).
constexpr int kColumns = 4, kRowBatch = 4;
template <class Member>
KOKKOS_INLINE_FUNCTION void sum_rows_into(const Member& m, Unmanaged2<const float> rows, int first, int count,
                                          float* dst, bool overwrite) {
  const int cols = static_cast<int>(rows.extent(1)), stride = (cols + kColumns - 1) / kColumns;
  const std::int64_t ld = static_cast<std::int64_t>(rows.stride_0());
  const float* row0 = rows.data() + first * ld;
  Kokkos::parallel_for(Kokkos::TeamVectorRange(m, stride), [&](const int g) {
    float sum[kColumns];
    for (int c = 0; c < kColumns; ++c) sum[c] = 0.f;
    for (int r0 = 0; r0 < count; r0 += kRowBatch) {
      float v[kRowBatch][kColumns];
      for (int b = 0; b < kRowBatch; ++b) {
        for (int c = 0; c < kColumns; ++c) {
          const int j = g + c * stride;
          v[b][c] = r0 + b < count && j < cols ? read_other_teams(row0 + (r0 + b) * ld + j) : 0.f;
        }
      }
      for (int b = 0; b < kRowBatch; ++b) {
        if (r0 + b < count) {
          for (int c = 0; c < kColumns; ++c) sum[c] += v[b][c];
        }
      }
    }
    for (int c = 0; c < kColumns; ++c) {
      const int j = g + c * stride;
      if (j < cols) dst[j] = overwrite ? sum[c] : dst[j] + sum[c];
    }
  });
}
}  // namespace column_sums_detail

// Called by every team of the launch, after it has written its partial row (all its threads).
template <class Member>
KOKKOS_INLINE_FUNCTION void close_column_sums(const Member& m, const ColumnSumTickets& t) {
  using namespace column_sums_detail;
  if (t.out.extent(0) == 0) return;
  const int blocks = static_cast<int>(t.partial.extent(0)), size = t.group_size;
  const int groups = (blocks + size - 1) / size, g = m.league_rank() / size;
  const int first = g * size, count = blocks - first < size ? blocks - first : size;
  if (!took_last_ticket(m, &t.counters(g), count)) return;
  if (groups == 1) {
    sum_rows_into(m, t.partial, 0, blocks, t.out.data(), t.overwrite);
    return;
  }
  sum_rows_into(m, t.partial, first, count, &t.level2(g, 0), true);
  if (!took_last_ticket(m, &t.counters(groups), groups)) return;
  sum_rows_into(m, Unmanaged2<const float>(t.level2), 0, groups, t.out.data(), t.overwrite);
}

}  // namespace shardft
