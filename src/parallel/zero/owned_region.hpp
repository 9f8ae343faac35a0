#pragma once
// The part of a partition this rank owns: the elements whose master weights, moments and reduced
// gradient it keeps and updates. With replicated state (stage 0) every unit whole, at its full offset;
// with sharded state (stages 1-3) this rank's shard of every unit, packed.
#include <cstdint>
#include <functional>
#include <vector>

#include "comm/communicator.hpp"
#include "config/model_config.hpp"
#include "kernels/flat_runs.hpp"
#include "kernels/types.hpp"
#include "model/layout_window.hpp"
#include "model/param_layout.hpp"
#include "parallel/flat_partition.hpp"

namespace shardft {

struct OwnedSegment {  // a piece of the owned region
  std::int64_t owned_offset, full_offset, length;
};

class OwnedRegion {
 public:
  OwnedRegion(const FlatPartition& part, bool sharded, int rank);

  bool sharded() const { return sharded_; }
  std::int64_t numel() const { return numel_; }
  const std::vector<OwnedSegment>& segments() const { return segments_; }  // one per unit

  // fn(param, first element of the param, offset in the owned region, length) for every piece of a
  // parameter this rank owns.
  template <class Fn>
  void for_each_param_slice(Fn&& fn) const;
  // One run per unit (kernels/flat_runs.hpp) whose value is the offset from the owned element to its
  // compute weight: 0 where the compute weights share the owned layout (stage 0, stage 3's shards),
  // else where the rank's shard lies in the full buffer (stages 1-2).
  std::vector<FlatRun> compute_runs(bool compute_in_full_buffer) const;
  // This region cut to unit `unit` alone, packed from offset 0 (the other units own nothing in it):
  // what a buffer holding one unit at a time is laid out as.
  OwnedRegion only_unit(std::size_t unit) const;
  // The owned region's values (a buffer laid out as the region) of units [first, last) written into
  // `out` at the partition's parameters, on every rank; collective over `group` when sharded. The
  // window must cover those units' parameters (the whole model, or the block of a one-unit range).
  // Unit by unit: besides `out`, only a sharded region's gathered unit is held, each parameter copied
  // from it into the window. A window without values (a rank that keeps no copy) takes part in the
  // gathers and copies nothing.
  void fill_layout(View1<float> owned, Communicator& group, LayoutWindow& out, std::size_t first,
                   std::size_t last) const;
  // One unit's values (in the compute space, laid out as the whole unit) into `out` at its parameters.
  void unit_to_layout(std::size_t unit, Unmanaged1<const float> values, LayoutWindow& out) const;

 private:
  const FlatPartition& part_;
  bool sharded_;
  int rank_;
  std::vector<OwnedSegment> segments_;
  std::int64_t numel_ = 0;
};

// Filling a buffer laid out as the owned region (master weights, or a frozen store's staging):
// with the seeded initialisation (init_params' values on one rank, each rank creating only its part),
void init_owned(const OwnedRegion& owned, const ParamLayout& layout, const ModelConfig& model, std::uint64_t seed,
                View1<float> dst);
// from the whole model in layout order,
void load_owned(const OwnedRegion& owned, const ParamLayout& layout, const std::vector<float>& layout_order,
                View1<float> dst);
// or piecewise: read(param, first, count, out) writes elements [first, first + count) of `param` (host);
// only parameters for which `wanted` says yes are read, the others keep dst's values.
using OwnedSliceReader = std::function<void(int param, std::int64_t first, std::int64_t count, float* out)>;
void read_owned(const OwnedRegion& owned, const OwnedSliceReader& read, const std::function<bool(int param)>& wanted,
                View1<float> dst);

template <class Fn>
void OwnedRegion::for_each_param_slice(Fn&& fn) const {
  const auto& units = part_.units();
  for (std::size_t ui = 0; ui < units.size(); ++ui) {
    const FlatUnit& u = units[ui];
    const OwnedSegment& o = segments_[ui];
    const std::int64_t lo = o.full_offset - u.full_offset, hi = lo + o.length;  // owned range inside the unit
    for (std::size_t k = 0; k < u.params.size(); ++k) {
      const std::int64_t b = std::max(lo, u.param_offset[k]);
      const std::int64_t e = std::min(hi, u.param_offset[k] + part_.numel_of(u.params[k]));
      if (b < e) fn(u.params[k], b - u.param_offset[k], o.owned_offset + (b - lo), e - b);
    }
  }
}

}  // namespace shardft
