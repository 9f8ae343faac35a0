#pragma once
// A flat buffer cut into runs: disjoint ranges [begin, end) in increasing order, each with one value
// (a weight-decay flag, an offset to copy to ...). Elements in no run (padding) are left alone.
// The table is built once on the host and kept on the device, so a kernel over the whole buffer is ONE
// launch however many runs it has (the optimizer's parameters, the units of a shard), instead of one
// launch per run.
//
// for_each_run_in_chunks launches one team per chunk of kRunChunk elements from the first run's begin
// (a table of one unit's runs far into a buffer launches no teams for what lies before it): the team finds the first run
// that reaches into its chunk by a binary search over the run ends, then calls body(member, value, a, b)
// for each piece [a, b) of a run inside the chunk, in order. The body spreads [a, b) over the team's
// threads (TeamThreadRange): contiguous elements on neighbouring threads (coalesced on a GPU), and on
// one thread (Serial) a plain loop over each piece with the run's value fixed, as fast as a loop per run.
#include <cstdint>
#include <vector>

#include "kernels/types.hpp"

namespace shardft {

struct FlatRun {
  std::int64_t begin = 0, length = 0, value = 0;
};

struct FlatRuns {
  View1<std::int64_t> begin, end, value;  // on the device, one entry per run
  std::int64_t span = 0;                   // end of the last run (0: no runs)
  std::int64_t first = 0;                  // begin of the first run: chunks start there
  int count() const { return static_cast<int>(begin.extent(0)); }
};

// Throws std::invalid_argument when runs overlap, go backwards or have a negative length. Empty runs are
// dropped; neighbours that touch and share a value become one run (the same elements, the same values).
FlatRuns make_flat_runs(const std::vector<FlatRun>& runs);

constexpr std::int64_t kRunChunk = 4096;

// Index of the first run whose end is beyond `at` (count when none): runs before it end at or before `at`.
KOKKOS_INLINE_FUNCTION int first_run_ending_after(const std::int64_t* end, int count, std::int64_t at) {
  int lo = 0, hi = count;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (end[mid] <= at) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// On `space` (an execution space instance: the compute stream's, or another queue's).
template <class Body>
void for_each_run_in_chunks(const ExecSpace& space, const char* name, const FlatRuns& runs, const Body& body) {
  using Team = TeamLaunch;
  const std::int64_t span = runs.span, first = runs.first;
  if (span == 0) return;
  const int count = runs.count();
  const std::int64_t* begin = runs.begin.data();
  const std::int64_t* end = runs.end.data();
  const std::int64_t* value = runs.value.data();
  const int chunks = static_cast<int>((span - first + kRunChunk - 1) / kRunChunk);
  Kokkos::parallel_for(
      name, Team(space, chunks, Kokkos::AUTO), KOKKOS_LAMBDA(const typename Team::member_type& m) {
        const std::int64_t lo = first + static_cast<std::int64_t>(m.league_rank()) * kRunChunk;
        const std::int64_t hi = lo + kRunChunk < span ? lo + kRunChunk : span;
        for (int r = first_run_ending_after(end, count, lo); r < count && begin[r] < hi; ++r) {
          const std::int64_t a = begin[r] > lo ? begin[r] : lo;
          const std::int64_t b = end[r] < hi ? end[r] : hi;
          body(m, value[r], a, b);
        }
      });
}

template <class Body>
void for_each_run_in_chunks(const char* name, const FlatRuns& runs, const Body& body) {
  for_each_run_in_chunks(ExecSpace(), name, runs, body);
}

}  // namespace shardft
