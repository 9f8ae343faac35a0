#include "parallel/zero/frozen_store.hpp"

#include <algorithm>

#include "model/decoder.hpp"

namespace shardft {

FrozenStore::FrozenStore(const ParamLayout& layout, const ZeroConfig& cfg, const ParallelPlan& plan)
    : layout_(layout),
      group_(plan.shard()),
      part_(layout, group_.size(), ParamSet::frozen),
      owned_(part_, cfg.stage > 0, group_.rank()),
      weights_(make_weight_store(part_, owned_, cfg, plan, pool_, View1<float>())),
      nf4_(std::make_unique<Nf4Weights>(layout, cfg.dtype, pool_, cfg.stage == 3 ? &group_ : nullptr)) {
  if (nf4_->empty()) nf4_.reset();
}

void FrozenStore::write_from_staging(const std::function<void(const OwnedRegion&, View1<float>)>& fill) {
  const std::vector<OwnedSegment>& segments = owned_.segments();
  for (std::size_t ui = 0; ui < segments.size(); ++ui) {
    if (segments[ui].length == 0) continue;
    View1<float> staging("zero_frozen_staging", static_cast<std::size_t>(segments[ui].length));
    fill(owned_.only_unit(ui), staging);
    weights_->write_unit_from(ui, staging);
  }
  weights_->share();
}

void FrozenStore::init(const ModelConfig& model, std::uint64_t seed) {
  if (nf4_) nf4_->load([&](int param, Unmanaged1<float> out) { init_param_range(layout_, model, seed, param, 0, out); });
  write_from_staging([&](const OwnedRegion& region, View1<float> staging) {
    init_owned(region, layout_, model, seed, staging);
  });
}

void FrozenStore::load(const std::vector<float>& layout_order) {
  if (nf4_) {
    nf4_->load([&](int param, Unmanaged1<float> out) {
      auto host = Kokkos::create_mirror_view(out);
      std::copy_n(layout_order.begin() + layout_.offset(param), out.extent(0), host.data());
      Kokkos::deep_copy(out, host);
    });
  }
  write_from_staging([&](const OwnedRegion& region, View1<float> staging) {
    load_owned(region, layout_, layout_order, staging);
  });
}

void FrozenStore::load(const OwnedSliceReader& read, const Nf4Weights::StoredNf4& stored) {
  if (nf4_) {
    nf4_->load([&](int param, Unmanaged1<float> out) {
      auto host = Kokkos::create_mirror_view(out);
      read(param, 0, static_cast<std::int64_t>(out.extent(0)), host.data());
      Kokkos::deep_copy(out, host);
    }, stored);
  }
  write_from_staging([&](const OwnedRegion& region, View1<float> staging) {
    read_owned(region, read, [](int) { return true; }, staging);
  });
}

void FrozenStore::acquire(int block, Pass pass) {
  if (nf4_) nf4_->acquire(block);
  weights_->acquire(block, pass);
  // QLoRA's NF4 bytes: the next block's only (nothing where they are held whole). prefetch_elements
  // counts compute-dtype elements, and the memory preflight bounds the NF4 bytes gathered at once by two
  // blocks' (nf4_peak_transient_bytes).
  const int next = block + (pass == Pass::forward ? 1 : -1);
  if (nf4_ && next >= 0 && next <= layout_.head_block()) nf4_->prefetch(next);
}

void FrozenStore::release(int block, Pass pass) {
  if (nf4_) nf4_->release(block);
  weights_->release(block, pass);
}

void FrozenStore::progress() {
  if (nf4_) nf4_->progress();
  weights_->progress();
}

Unmanaged1<const float> FrozenStore::weight(int param) {
  if (nf4_ && nf4_->holds(param)) return nf4_->weight(param);
  return weights_->weight(param);
}

Unmanaged1<const bf16> FrozenStore::weight_bf16(int param) {
  if (nf4_ && nf4_->holds(param)) return nf4_->weight_bf16(param);
  return weights_->weight_bf16(param);
}

void FrozenStore::fill_layout(LayoutWindow& out, std::size_t first, std::size_t last) {
  weights_->fill_layout(group_, out, first, last);
  if (!nf4_) return;
  for (std::size_t block = first; block < last; ++block) {
    for (int p : block_own_params(layout_, static_cast<int>(block))) {
      if (!nf4_->holds(p)) continue;
      View1<float> d("zero_nf4_read", layout_.params()[p].numel());
      nf4_->read(p, d);  // collective at stage 3: every rank reads, the ranks that keep a copy copy
      if (!out.keeps()) continue;
      auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d);
      std::copy_n(host.data(), host.extent(0), out.at(layout_, p));
    }
  }
}

void FrozenStore::add_to(MemoryReport& m) const {
  std::int64_t weights = weights_->bytes(), gathered = weights_->peak_gathered_bytes();
  if (nf4_) {
    m.nf4_weights = nf4_->storage_bytes();
    weights += m.nf4_weights;
    // Tracked apart from the units' peak (stages 0-2 gather no units): the sum bounds their joint peak.
    m.peak_nf4_transient = nf4_->peak_transient_bytes();
    gathered += m.peak_nf4_transient;
  }
  m.weights += weights;
  m.frozen_weights = weights;
  m.peak_gathered += gathered;
  m.pooled += pool_.held_bytes();
}

}  // namespace shardft
