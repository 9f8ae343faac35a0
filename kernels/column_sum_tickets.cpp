#include "kernels/column_sum_tickets.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/kernel_scratch.hpp"

namespace shardft {

ColumnSumTickets column_sum_tickets(const char* name, Unmanaged2<const float> partial, Unmanaged1<float> out,
                                    bool overwrite, int group_size) {
  const int blocks = static_cast<int>(partial.extent(0));
  if (out.extent(0) > 0 && out.extent(0) != partial.extent(1)) {
    throw std::invalid_argument(std::string(name) + ": the column sums' output must have the partial rows' width");
  }
  if (group_size <= 0) {
    group_size = kComputeOnDevice ? static_cast<int>(std::ceil(std::sqrt(static_cast<double>(blocks)))) : blocks;
  }
  group_size = std::max(1, std::min(group_size, std::max(blocks, 1)));
  const int groups = (blocks + group_size - 1) / group_size;
  ColumnSumTickets t;
  t.partial = partial;
  t.out = out;
  t.group_size = group_size;
  t.overwrite = overwrite;
  if (out.extent(0) == 0 || blocks == 0) return t;
  const std::string base(name);
  t.counters = kernel_counters((base + " tickets").c_str(), static_cast<std::size_t>(groups) + 1);
  if (groups > 1) t.level2 = kernel_scratch<float>((base + " group sums").c_str(), groups, partial.extent(1));
  return t;
}

}  // namespace shardft
