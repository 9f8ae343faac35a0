#pragma once
// Values of a contiguous range of the layout's flat order (ParamLayout::offset): elements
// [begin, begin + values.size()). What a gather of the master weights fills: the whole model, or one
// block's own parameters at a time (the export streams the model so). A window without values
// belongs to a rank that takes part in the gathers and keeps nothing.
#include <cstdint>
#include <vector>

#include "model/param_layout.hpp"

namespace shardft {

struct LayoutWindow {
  std::int64_t begin = 0;
  std::vector<float> values;

  bool keeps() const { return !values.empty(); }
  // The parameter's first element; the parameter must lie inside the window.
  float* at(const ParamLayout& layout, int param) { return values.data() + (layout.offset(param) - begin); }
  const float* at(const ParamLayout& layout, int param) const {
    return values.data() + (layout.offset(param) - begin);
  }
};

// The whole model; values zeroed when keep, else none.
LayoutWindow whole_layout_window(const ParamLayout& layout, bool keep);
// The parameters block `block` owns, in layout order: its own, not one it shares with an earlier
// block (the tied embedding belongs to block 0, as in FlatPartition's units).
std::vector<int> block_own_params(const ParamLayout& layout, int block);
// Their range, which the layout keeps contiguous; values zeroed when keep, else none.
LayoutWindow block_layout_window(const ParamLayout& layout, int block, bool keep);

}  // namespace shardft
