#include "kernels/flat_runs.hpp"

#include <stdexcept>
#include <string>

namespace shardft {

FlatRuns make_flat_runs(const std::vector<FlatRun>& runs) {
  std::vector<FlatRun> merged;
  std::int64_t last_end = 0;
  for (const FlatRun& r : runs) {
    if (r.length < 0 || r.begin < last_end) {
      throw std::invalid_argument("make_flat_runs: run at " + std::to_string(r.begin) +
                                  " overlaps the one before or has a negative length");
    }
    if (r.length == 0) continue;
    last_end = r.begin + r.length;
    if (!merged.empty() && merged.back().begin + merged.back().length == r.begin && merged.back().value == r.value) {
      merged.back().length += r.length;
    } else {
      merged.push_back(r);
    }
  }
  const std::size_t n = merged.size();
  FlatRuns out{View1<std::int64_t>("flat_runs_begin", n), View1<std::int64_t>("flat_runs_end", n),
               View1<std::int64_t>("flat_runs_value", n), n == 0 ? 0 : merged.back().begin + merged.back().length,
               n == 0 ? 0 : merged.front().begin};
  auto b = Kokkos::create_mirror_view(out.begin);
  auto e = Kokkos::create_mirror_view(out.end);
  auto v = Kokkos::create_mirror_view(out.value);
  for (std::size_t i = 0; i < n; ++i) {
    b(i) = merged[i].begin;
    e(i) = merged[i].begin + merged[i].length;
    v(i) = merged[i].value;
  }
  Kokkos::deep_copy(out.begin, b);
  Kokkos::deep_copy(out.end, e);
  Kokkos::deep_copy(out.value, v);
  return out;
}

}  // namespace shardft
