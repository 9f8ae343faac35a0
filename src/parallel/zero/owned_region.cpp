#include "parallel/zero/owned_region.hpp"

#include <algorithm>
#include <string>

#include "model/decoder.hpp"

namespace shardft {

OwnedRegion::OwnedRegion(const FlatPartition& part, bool sharded, int rank) : part_(part), sharded_(sharded), rank_(rank) {
  for (const FlatUnit& u : part.units()) {
    if (sharded) {
      segments_.push_back({u.shard_offset, u.full_offset + rank * u.shard, u.shard});
    } else {
      segments_.push_back({u.full_offset, u.full_offset, u.padded});
    }
  }
  numel_ = sharded ? part.shard_numel() : part.full_numel();
}

OwnedRegion OwnedRegion::only_unit(std::size_t unit) const {
  OwnedRegion one(*this);
  for (std::size_t ui = 0; ui < one.segments_.size(); ++ui) {
    OwnedSegment& s = one.segments_[ui];
    s = OwnedSegment{0, s.full_offset, ui == unit ? s.length : 0};
  }
  one.numel_ = segments_.at(unit).length;
  return one;
}

std::vector<FlatRun> OwnedRegion::compute_runs(bool compute_in_full_buffer) const {
  std::vector<FlatRun> runs;
  for (const OwnedSegment& o : segments_) {
    runs.push_back({o.owned_offset, o.length, compute_in_full_buffer ? o.full_offset - o.owned_offset : 0});
  }
  return runs;
}

void OwnedRegion::fill_layout(View1<float> owned, Communicator& group, LayoutWindow& out, std::size_t first,
                              std::size_t last) const {
  auto slice = [](const View1<float>& v, std::int64_t off, std::int64_t n) { return Unmanaged1<float>(v.data() + off, n); };
  std::int64_t largest = 0;
  for (std::size_t ui = first; ui < last; ++ui) largest = std::max(largest, part_.units()[ui].padded);
  View1<float> unit("zero_export_unit", static_cast<std::size_t>(sharded_ ? largest : 0));
  for (std::size_t ui = first; ui < last; ++ui) {
    const FlatUnit& u = part_.units()[ui];
    if (u.padded == 0) continue;
    const OwnedSegment& o = segments_[ui];  // this rank's shard of the unit, or all of it
    Unmanaged1<float> whole = slice(owned, o.owned_offset, o.length);
    if (sharded_) {
      Kokkos::deep_copy(slice(unit, o.full_offset - u.full_offset, o.length), whole);
      group.all_gather(unit.data() + rank_ * u.shard, unit.data(), static_cast<std::size_t>(u.shard), DType::f32);
      whole = slice(unit, 0, u.padded);
    }
    if (out.keeps()) unit_to_layout(ui, whole, out);
  }
}

void OwnedRegion::unit_to_layout(std::size_t unit, Unmanaged1<const float> values, LayoutWindow& out) const {
  using HostSlice = Kokkos::View<float*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const ParamLayout& layout = part_.layout();
  const FlatUnit& u = part_.units()[unit];
  for (std::size_t k = 0; k < u.params.size(); ++k) {
    const int p = u.params[k];
    const std::int64_t n = part_.numel_of(p);
    Kokkos::deep_copy(HostSlice(out.at(layout, p), n), Unmanaged1<const float>(values.data() + u.param_offset[k], n));
  }
}

void init_owned(const OwnedRegion& owned, const ParamLayout& layout, const ModelConfig& model, std::uint64_t seed,
                View1<float> dst) {
  owned.for_each_param_slice([&](int param, std::int64_t first, std::int64_t owned_offset, std::int64_t length) {
    init_param_range(layout, model, seed, param, first, Unmanaged1<float>(dst.data() + owned_offset, length));
  });
}

void load_owned(const OwnedRegion& owned, const ParamLayout& layout, const std::vector<float>& layout_order,
                View1<float> dst) {
  auto host = Kokkos::create_mirror_view(dst);
  Kokkos::deep_copy(host, 0.f);
  owned.for_each_param_slice([&](int param, std::int64_t first, std::int64_t owned_offset, std::int64_t length) {
    std::copy_n(layout_order.begin() + layout.offset(param) + first, length, host.data() + owned_offset);
  });
  Kokkos::deep_copy(dst, host);
}

void read_owned(const OwnedRegion& owned, const OwnedSliceReader& read, const std::function<bool(int param)>& wanted,
                View1<float> dst) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), dst);
  owned.for_each_param_slice([&](int param, std::int64_t first, std::int64_t owned_offset, std::int64_t length) {
    if (wanted(param)) read(param, first, length, host.data() + owned_offset);
  });
  Kokkos::deep_copy(dst, host);
}

}  // namespace shardft
