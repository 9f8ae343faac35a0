#include "parallel/zero/grad_sum_state.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace shardft {

namespace {
void zero_range(float* base, std::int64_t begin, std::int64_t end) {
  if (end > begin) Kokkos::deep_copy(ExecSpace(), Unmanaged1<float>(base + begin, end - begin), 0.f);
}
}  // namespace

GradSumState::GradSumState(const FlatPartition& part) : part_(part), reached_(part.num_params(), 0) {}

void GradSumState::start() { std::fill(reached_.begin(), reached_.end(), 0); }

void GradSumState::start_unit(int unit) {
  for (int p : part_.units()[unit].params) reached_[p] = 0;
}

GradWrite GradSumState::claim(int param, Unmanaged1<float> values, GradUse use) {
  const bool stale = !reached_[param];
  reached_[param] = 1;
  if (stale && use == GradUse::add) Kokkos::deep_copy(ExecSpace(), values, 0.f);
  return {values, stale && use == GradUse::write};
}

void GradSumState::settle(int unit, float* unit_values) const {
  const FlatUnit& u = part_.units()[unit];
  // The parameters that were reached, in unit order; everything between and after them is zeroed.
  std::vector<std::pair<std::int64_t, std::int64_t>> kept;
  for (std::size_t i = 0; i < u.params.size(); ++i) {
    if (reached_[u.params[i]]) kept.emplace_back(u.param_offset[i], u.param_offset[i] + part_.numel_of(u.params[i]));
  }
  std::sort(kept.begin(), kept.end());
  std::int64_t at = 0;
  for (const auto& [begin, end] : kept) {
    zero_range(unit_values, at, begin);
    at = std::max(at, end);
  }
  zero_range(unit_values, at, u.padded);
}

}  // namespace shardft
