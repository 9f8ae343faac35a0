#include "model/layout_window.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace shardft {

LayoutWindow whole_layout_window(const ParamLayout& layout, bool keep) {
  return {0, std::vector<float>(keep ? static_cast<std::size_t>(layout.total_numel()) : 0, 0.f)};
}

std::vector<int> block_own_params(const ParamLayout& layout, int block) {
  std::vector<int> own;
  for (int p : layout.blocks().at(static_cast<std::size_t>(block)).params) {
    bool earlier = false;
    for (int b = 0; b < block && !earlier; ++b) {
      const auto& ps = layout.blocks()[static_cast<std::size_t>(b)].params;
      earlier = std::find(ps.begin(), ps.end(), p) != ps.end();
    }
    if (!earlier) own.push_back(p);
  }
  std::sort(own.begin(), own.end(), [&](int a, int b) { return layout.offset(a) < layout.offset(b); });
  return own;
}

LayoutWindow block_layout_window(const ParamLayout& layout, int block, bool keep) {
  const std::vector<int> own = block_own_params(layout, block);
  if (own.empty()) return {};
  const std::int64_t begin = layout.offset(own.front());
  std::int64_t end = begin;
  for (int p : own) {
    if (layout.offset(p) != end) {
      throw std::logic_error("block " + layout.blocks()[static_cast<std::size_t>(block)].name +
                             ": its parameters are not contiguous in the layout at " + layout.params()[p].name);
    }
    end += layout.params()[p].numel();
  }
  return {begin, std::vector<float>(keep ? static_cast<std::size_t>(end - begin) : 0, 0.f)};
}

}  // namespace shardft
