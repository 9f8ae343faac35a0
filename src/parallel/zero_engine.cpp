#include "parallel/zero_engine.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <stdexcept>
#include <string>

#include "comm/cast_collectives.hpp"
#include "comm/quantized_collectives.hpp"
#include "kernels/adamw.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/runs_cast.hpp"

namespace shardft {

namespace {
Unmanaged1<float> slice(const View1<float>& v, std::int64_t off, std::int64_t n) {
  return Unmanaged1<float>(v.data() + off, n);
}
View1<float> zeros(const char* name, std::int64_t n) { return View1<float>(std::string(name), n); }
}  // namespace

template <class Fn>
void ZeroEngine::for_each_owned_slice(Fn&& fn) const {
  const auto& units = part_.units();
  for (std::size_t ui = 0; ui < units.size(); ++ui) {
    const FlatUnit& u = units[ui];
    const OwnedSegment& o = owned_[ui];
    const std::int64_t lo = o.full_offset - u.full_offset, hi = lo + o.length;  // owned range inside the unit
    for (std::size_t k = 0; k < u.params.size(); ++k) {
      const std::int64_t b = std::max(lo, u.param_offset[k]);
      const std::int64_t e = std::min(hi, u.param_offset[k] + layout_.params()[u.params[k]].numel());
      if (b < e) fn(u.params[k], b - u.param_offset[k], o.owned_offset + (b - lo), e - b);
    }
  }
}

ZeroEngine::ZeroEngine(const ParamLayout& layout, const ZeroConfig& cfg, const ParallelPlan& plan)
    : ZeroEngine(layout, cfg, plan, layout.has_frozen() ? ParamSet::trainable : ParamSet::all) {
  if (layout.has_frozen()) frozen_.reset(new ZeroEngine(layout, cfg, plan, ParamSet::frozen));
}

ZeroEngine::ZeroEngine(const ParamLayout& layout, const ZeroConfig& cfg, const ParallelPlan& plan, ParamSet set)
    : layout_(layout),
      cfg_(cfg),
      plan_(plan),
      group_(plan.shard()),
      replica_(plan.replica() && plan.replica()->size() > 1 ? plan.replica() : nullptr),
      set_(set),
      frozen_only_(set == ParamSet::frozen),
      part_(layout, group_.size(), set),
      rank_(group_.rank()),
      size_(group_.size()) {
  // The recipe's combinations are checked by config/, the layout by the plan; these are the engine's
  // own preconditions, for callers that build a ZeroConfig by hand.
  if (cfg.stage < 0 || cfg.stage > 3) throw std::invalid_argument("zero_stage must be 0, 1, 2 or 3");
  if ((cfg.quantized_weights || cfg.hpz_partition_size > 1) && cfg.stage != 3) {
    throw std::invalid_argument("zero_quantized_weights and zero_hpz_partition_size need zero_stage 3");
  }
  if (cfg.quantized_gradients && cfg.stage < 2) throw std::invalid_argument("zero_quantized_gradients needs zero_stage 2 or 3");
  if (cfg.hpz_partition_size > 1 && (!plan.hpz() || plan.hpz()->size() != cfg.hpz_partition_size)) {
    throw std::invalid_argument("zero_hpz_partition_size needs a plan with hpZ groups of that size");
  }
  if (cfg.quantized_gradients && (!plan.qgz_intra() || !plan.qgz_cross())) {
    throw std::invalid_argument("zero_quantized_gradients needs a plan with qgZ's intra- and inter-node groups");
  }
  const auto& units = part_.units();
  // What this rank owns: all of every unit at stage 0, its shard of every unit otherwise.
  for (const FlatUnit& u : units) {
    if (cfg.stage == 0) {
      owned_.push_back({u.full_offset, u.full_offset, u.padded});
    } else {
      owned_.push_back({u.shard_offset, u.full_offset + rank_ * u.shard, u.shard});
    }
  }
  owned_numel_ = cfg.stage == 0 ? part_.full_numel() : part_.shard_numel();
  if (!frozen_only_) {  // a frozen engine's master weights exist only while it loads (load_weights)
    master_ = zeros("zero_master", owned_numel_);
    exp_avg_ = zeros("zero_exp_avg", owned_numel_);
    exp_avg_sq_ = zeros("zero_exp_avg_sq", owned_numel_);
    clip_factor_ = zeros("zero_clip_factor", 1);
  }
  // qwZ's int8 gathers dequantize into fp32 (values that are not bf16), so its weights stay fp32.
  bf16_weights_ = cfg.dtype == ComputeDtype::bf16 && !cfg.quantized_weights;
  if (cfg.stage == 0 && cfg.dtype == ComputeDtype::fp32 && !frozen_only_) {
    // Stage 0 owns every unit at its full offset, so in fp32 the compute weights are the master
    // weights themselves: one copy of the model fewer (16 bytes a parameter, as PyTorch DDP + Adam).
    full_weights_ = master_;
  } else if (cfg.stage < 3) {
    if (bf16_weights_) {
      full_weights_bf16_ = View1<bf16>("zero_full_weights_bf16", part_.full_numel());
    } else {
      full_weights_ = zeros("zero_full_weights", part_.full_numel());
    }
  } else if (bf16_weights_) {
    shard_weights_bf16_ = View1<bf16>("zero_shard_weights_bf16", part_.shard_numel());
  } else {
    shard_weights_ = zeros("zero_shard_weights", part_.shard_numel());
  }
  make_runs();  // after the weights: whether the compute weights are a copy decides the optimizer's table
  if (frozen_only_) {
    nf4_ = std::make_unique<Nf4Weights>(layout, cfg.dtype, pool_, cfg.stage == 3 ? &group_ : nullptr);
    if (nf4_->empty()) nf4_.reset();
  }
  if (cfg.stage <= 1 && !frozen_only_) full_grads_ = zeros("zero_full_grads", part_.full_numel());
  if (!frozen_only_) grad_owned_ = cfg.stage == 0 ? full_grads_ : zeros("zero_grad_shard", owned_numel_);
  std::int64_t max_shard = 0;
  for (const FlatUnit& u : units) max_shard = std::max(max_shard, u.shard);
  if (cfg.quantized_gradients && !frozen_only_) scratch_shard_ = zeros("zero_scratch_shard", max_shard);  // qgZ's blocking reduction
  gathered_.resize(units.size());
  gathered_bf16_.resize(units.size());
  widened_.resize(layout.params().size());
  secondary_bf16_.resize(units.size());
  pending_.resize(units.size());
  refcount_.assign(units.size(), 0);
  unit_grads_.resize(units.size());
  secondary_.resize(units.size());
  bucketed_.assign(units.size(), 0);
  if (cfg.stage >= 1 && !cfg.quantized_gradients && !frozen_only_) {
    buckets_ = std::make_unique<GradBuckets>(part_, group_, grad_owned_,
                                             GradBucketOptions{cfg.reduce_bucket_elements, cfg.bf16_gradients, cfg.overlap_comm},
                                             pool_);
  }
}

void ZeroEngine::make_runs() {
  std::vector<FlatRun> compute;
  for (const OwnedSegment& o : owned_) {
    compute.push_back({o.owned_offset, o.length, cfg_.stage == 3 ? 0 : o.full_offset - o.owned_offset});
  }
  compute_runs_ = make_flat_runs(compute);
  if (frozen_only_) return;  // a frozen engine takes no optimizer step
  std::vector<FlatRun> decay;
  for_each_owned_slice([&](int param, std::int64_t, std::int64_t owned_offset, std::int64_t length) {
    decay.push_back({owned_offset, length, layout_.params()[param].takes_weight_decay() ? 1 : 0});
  });
  decay_runs_ = make_flat_runs(decay);
  if (has_compute_copy()) update_runs_ = make_flat_runs(adamw_copy_runs(decay, compute));
}

void ZeroEngine::init_weights(const ModelConfig& model, std::uint64_t seed) {
  if (frozen_) frozen_->init_weights(model, seed);
  if (nf4_) nf4_->load([&](int param, Unmanaged1<float> out) { init_param_range(layout_, model, seed, param, 0, out); });
  if (frozen_only_) master_ = zeros("zero_frozen_staging", owned_numel_);
  for_each_owned_slice([&](int param, std::int64_t first, std::int64_t owned_offset, std::int64_t length) {
    init_param_range(layout_, model, seed, param, first, slice(master_, owned_offset, length));
  });
  refresh_compute_weights();
  if (frozen_only_) master_ = View1<float>();
}

void ZeroEngine::load_weights(const std::vector<float>& layout_order) {
  if (static_cast<std::int64_t>(layout_order.size()) != layout_.total_numel()) {
    throw std::invalid_argument("load_weights: expected " + std::to_string(layout_.total_numel()) + " values");
  }
  if (frozen_) frozen_->load_weights(layout_order);
  if (nf4_) {
    nf4_->load([&](int param, Unmanaged1<float> out) {
      auto host = Kokkos::create_mirror_view(out);
      std::copy_n(layout_order.begin() + layout_.offset(param), out.extent(0), host.data());
      Kokkos::deep_copy(out, host);
    });
  }
  if (frozen_only_) master_ = zeros("zero_frozen_staging", owned_numel_);
  auto host = Kokkos::create_mirror_view(master_);
  Kokkos::deep_copy(host, 0.f);
  for_each_owned_slice([&](int param, std::int64_t first, std::int64_t owned_offset, std::int64_t length) {
    std::copy_n(layout_order.begin() + layout_.offset(param) + first, length, host.data() + owned_offset);
  });
  Kokkos::deep_copy(master_, host);
  refresh_compute_weights();
  if (frozen_only_) master_ = View1<float>();
}

void ZeroEngine::load_weights(const WeightSliceReader& read, ParamSet which, const Nf4Weights::StoredNf4& stored) {
  if (frozen_ && which != ParamSet::trainable) frozen_->load_weights(read, ParamSet::all, stored);
  if (which == ParamSet::frozen && !frozen_only_) return;  // this engine holds none of them
  if (nf4_) {
    nf4_->load([&](int param, Unmanaged1<float> out) {
      auto host = Kokkos::create_mirror_view(out);
      read(param, 0, static_cast<std::int64_t>(out.extent(0)), host.data());
      Kokkos::deep_copy(out, host);
    }, stored);
  }
  if (frozen_only_) master_ = zeros("zero_frozen_staging", owned_numel_);
  // Parameters not read keep their values (padding is zero either way).
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), master_);
  for_each_owned_slice([&](int param, std::int64_t first, std::int64_t owned_offset, std::int64_t length) {
    if (in_param_set(layout_.params()[param], which)) read(param, first, length, host.data() + owned_offset);
  });
  Kokkos::deep_copy(master_, host);
  refresh_compute_weights();
  if (frozen_only_) master_ = View1<float>();
}

bool ZeroEngine::has_compute_copy() const { return full_weights_.data() != master_.data(); }

ComputeWeights ZeroEngine::compute_weights() {
  if (bf16_weights_) return {cfg_.stage == 3 ? shard_weights_bf16_ : full_weights_bf16_, {}, RunCast::copy};
  const RunCast cast = cfg_.dtype == ComputeDtype::bf16   ? RunCast::round_bf16
                       : cfg_.dtype == ComputeDtype::fp16 ? RunCast::round_fp16
                                                          : RunCast::copy;
  return {{}, cfg_.stage == 3 ? shard_weights_ : full_weights_, cast};
}

void ZeroEngine::refresh_compute_weights() {
  // The owned master weights into the compute weights, in one launch over compute_runs_ (stage 0 in
  // fp32 computes with the master weights themselves: nothing to do).
  if (has_compute_copy()) {
    const ComputeWeights w = compute_weights();
    if (bf16_weights_) {
      cast_runs(master_, compute_runs_, w.bf16_storage);
    } else {
      cast_runs(master_, compute_runs_, w.cast, w.f32_storage);
    }
  }
  share_compute_weights();
}

void ZeroEngine::share_compute_weights() {
  for (View1<float>& w : widened_) pool_.give(w);  // copies of the old weights
  if (cfg_.stage == 0 || cfg_.stage == 3) return;
  // Every rank updated its shard; gather the rest in place, with up to allgather_bucket_elements in
  // flight at once (DeepSpeed's allgather_bucket_size: it bounds the gathers' transient buffers).
  std::deque<RequestPtr> inflight;
  std::deque<std::int64_t> sizes;
  std::int64_t in_flight = 0;
  for (const FlatUnit& u : part_.units()) {
    if (u.padded == 0) continue;  // a block without parameters of this engine's set
    const std::size_t shard = static_cast<std::size_t>(u.shard);
    if (bf16_weights_) {
      bf16* unit = full_weights_bf16_.data() + u.full_offset;
      inflight.push_back(group_.iall_gather(unit + rank_ * u.shard, unit, shard, DType::bf16));
    } else {
      float* unit = full_weights_.data() + u.full_offset;
      // bf16 values held as fp32 (qwZ): they travel as bf16, half the bytes, no loss.
      inflight.push_back(cfg_.dtype == ComputeDtype::bf16 ? iall_gather_as_bf16(group_, unit + rank_ * u.shard, shard, unit)
                                                          : group_.iall_gather(unit + rank_ * u.shard, unit, shard, DType::f32));
    }
    sizes.push_back(u.padded);
    in_flight += u.padded;
    while (!inflight.empty() && in_flight > cfg_.allgather_bucket_elements) {
      inflight.front()->wait();
      inflight.pop_front();
      in_flight -= sizes.front();
      sizes.pop_front();
    }
  }
  for (auto& r : inflight) r->wait();
}

// ---- the step --------------------------------------------------------------------------------------

void ZeroEngine::begin_step() {
  if (buckets_) buckets_->finish();  // nothing should be in flight; never leave a collective behind
  std::fill(bucketed_.begin(), bucketed_.end(), 0);
  clip_pending_ = false;  // the factor was the last step's
  if (full_grads_.extent(0) > 0) Kokkos::deep_copy(ExecSpace(), full_grads_, 0.f);
  // At stage 0 the owned gradient is the full one (the same buffer): zeroed once, above.
  if (grad_owned_.data() != full_grads_.data()) Kokkos::deep_copy(ExecSpace(), grad_owned_, 0.f);
}

void ZeroEngine::begin_micro_batch(bool last) { last_micro_batch_ = last; }

void ZeroEngine::end_micro_batch() {
  if (!last_micro_batch_) {
    // Stages 0-1 accumulate locally until the step's last micro-batch. At stages 2-3 the last bucket
    // starts now and may stay in flight through the next micro-batch's forward: buckets complete in
    // the order they started, so the owned gradient sums them in the same order whatever the timing.
    if (buckets_) buckets_->flush();
    return;
  }
  if (cfg_.stage == 0) {
    // Stage 0 stays one blocking all-reduce after backward: its bf16 form (all_reduce_as_bf16) and the
    // in-place sum over the whole replicated gradient have no bucketed path yet.
    all_reduce_grads(group_, full_grads_);
  } else if (cfg_.stage == 1) {
    for (std::size_t u = 0; u < part_.units().size(); ++u) {  // units whose block_done never came
      if (!bucketed_[u] && part_.units()[u].padded > 0) buckets_->add(static_cast<int>(u), full_grads_.data() + part_.units()[u].full_offset, {});
    }
  }
  if (buckets_) buckets_->finish();  // before anything (clip_grad_norm, the replicas) reads the gradient
  // Hybrid sharding: the copies of the model average their gradient shards once per step. Blocking: it
  // needs every bucket of every micro-batch summed, and nothing computes after it to overlap with.
  if (replica_) all_reduce_grads(*replica_, grad_owned_);
}

void ZeroEngine::all_reduce_grads(Communicator& group, View1<float> buf) {
  if (cfg_.bf16_gradients) {
    all_reduce_as_bf16(group, buf.data(), buf.extent(0));
  } else {
    group.all_reduce(buf.data(), buf.data(), buf.extent(0), DType::f32, ReduceOp::sum);
  }
}

// qgZ stays blocking, one unit at a time: its second hop (across nodes) sends the partial sums the
// first hop (within the node) produced, re-quantized, so it is two all-to-alls with compute between
// them, which one nonblocking request cannot carry without a progress thread to run that compute.
void ZeroEngine::reduce_unit_grad_int4(int unit, const float* full_unit_grad) {
  const FlatUnit& u = part_.units()[unit];
  auto tmp = slice(scratch_shard_, 0, u.shard);
  quantized_reduce_scatter_int4(*plan_.qgz_intra(), *plan_.qgz_cross(), full_unit_grad, static_cast<std::size_t>(u.shard),
                                tmp.data(), cfg_.quantization_block, nonfinite_);
  add_inplace(slice(grad_owned_, u.shard_offset, u.shard), tmp);
}

void ZeroEngine::clip_grad_norm(double max_norm, Unmanaged1<double> norm_sq) {
  apply_pending_clip();  // a second call measures the gradient the first one clipped
  sum_squares(grad_owned_, norm_sq);
  if (cfg_.stage >= 1) group_.all_reduce(norm_sq.data(), norm_sq.data(), 1, DType::f64, ReduceOp::sum);
  if (!(max_norm > 0)) return;
  // clip_to_norm's factor, left for optimizer_step to apply as it reads the gradient
  clip_factor(norm_sq, max_norm, clip_factor_);
  clip_pending_ = true;
}

// The deferred clip in place, for readers of the gradient other than the optimizer step.
void ZeroEngine::apply_pending_clip() {
  if (!clip_pending_) return;
  apply_clip_factor(grad_owned_, clip_factor_);
  clip_pending_ = false;
}

void ZeroEngine::scale_grads(float factor) {
  apply_pending_clip();
  scale_inplace(grad_owned_, factor);
}

void ZeroEngine::optimizer_step(double lr) {
  ++step_;
  AdamWHyper h;
  h.lr = static_cast<float>(lr);
  h.beta1 = static_cast<float>(cfg_.adam_beta1);
  h.beta2 = static_cast<float>(cfg_.adam_beta2);
  h.eps = static_cast<float>(cfg_.adam_epsilon);
  h.step = step_;
  h.weight_decay = static_cast<float>(cfg_.weight_decay);  // where decay_runs_ says the parameter takes it
  // One launch over the owned shard, which also writes the compute weights (the refresh) where they are
  // a copy. A pending clip is applied as AdamW reads each element and stays pending: the gradient in
  // memory is still unclipped until something else reads it.
  drain_gathers();  // gathered copies hold the old weights, and no gather may read the compute weights now
  const Unmanaged1<const float> clip = clip_pending_ ? Unmanaged1<const float>(clip_factor_.data(), 1) : Unmanaged1<const float>();
  if (has_compute_copy()) {
    adamw_update_runs(h, update_runs_, master_, grad_owned_, exp_avg_, exp_avg_sq_, clip, compute_weights());
  } else {
    adamw_update_runs(h, decay_runs_, master_, grad_owned_, exp_avg_, exp_avg_sq_, clip);
  }
  share_compute_weights();
}

// ---- GradSink --------------------------------------------------------------------------------------

Unmanaged1<float> ZeroEngine::grad(int param) {
  progress();
  if (!holds(param)) return {};  // frozen: no gradient
  const int u = part_.unit_of(param);
  const std::int64_t n = layout_.params()[param].numel(), off = part_.offset_in_unit(param);
  if (cfg_.stage <= 1) return Unmanaged1<float>(full_grads_.data() + part_.units()[u].full_offset + off, n);
  if (unit_grads_[u].extent(0) == 0) {
    unit_grads_[u] = pool_.take(part_.units()[u].padded, "zero_unit_grad");
    Kokkos::deep_copy(ExecSpace(), unit_grads_[u], 0.f);  // backward accumulates into it
    track_peaks();
  }
  return Unmanaged1<float>(unit_grads_[u].data() + off, n);
}

void ZeroEngine::block_done(int block) {
  // The block's own unit is complete once its block is done: a shared weight (the tied embedding)
  // belongs to the earliest block, which backward reaches last.
  const int u = block;
  if (part_.units()[u].padded == 0) return;
  if (cfg_.stage == 1) {  // the accumulated gradient is final in the step's last backward
    if (last_micro_batch_ && !bucketed_[u]) {
      bucketed_[u] = 1;
      buckets_->add(u, full_grads_.data() + part_.units()[u].full_offset, {});
    }
    return;
  }
  if (cfg_.stage == 0 || unit_grads_[u].extent(0) == 0) return;
  if (cfg_.quantized_gradients) {
    reduce_unit_grad_int4(u, unit_grads_[u].data());
    pool_.give(unit_grads_[u]);
  } else {
    buckets_->add(u, unit_grads_[u].data(), std::move(unit_grads_[u]));  // held until reduced, then pooled
  }
  track_peaks();
}

// ---- inspection ------------------------------------------------------------------------------------

// The owned region in layout order, through the host unit by unit: the device holds no second copy of
// the model (an export used to: a full fp32 buffer, 4.6 GiB beside a 1B model's state), only, at stages
// 1-3, the one unit being gathered.
std::vector<float> ZeroEngine::owned_to_layout(View1<float> owned) {
  using HostSlice = Kokkos::View<float*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  std::vector<float> host(static_cast<std::size_t>(part_.full_numel()), 0.f);
  if (cfg_.stage == 0) {
    for (const OwnedSegment& o : owned_) {
      Kokkos::deep_copy(HostSlice(host.data() + o.full_offset, o.length), slice(owned, o.owned_offset, o.length));
    }
    return host_full_to_layout(host.data());
  }
  std::int64_t largest = 0;
  for (const FlatUnit& u : part_.units()) largest = std::max(largest, u.padded);
  View1<float> unit("zero_export_unit", static_cast<std::size_t>(largest));
  for (const FlatUnit& u : part_.units()) {
    if (u.padded == 0) continue;
    for (const OwnedSegment& o : owned_) {  // this rank's pieces of the unit: its shard
      if (o.full_offset < u.full_offset || o.full_offset >= u.full_offset + u.padded) continue;
      Kokkos::deep_copy(slice(unit, o.full_offset - u.full_offset, o.length), slice(owned, o.owned_offset, o.length));
    }
    group_.all_gather(unit.data() + rank_ * u.shard, unit.data(), static_cast<std::size_t>(u.shard), DType::f32);
    Kokkos::deep_copy(HostSlice(host.data() + u.full_offset, u.padded), slice(unit, 0, u.padded));
  }
  return host_full_to_layout(host.data());
}

// The flat buffer of every unit -> layout order (parameters of other sets stay zero).
std::vector<float> ZeroEngine::full_to_layout(View1<float> full) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), full);
  return host_full_to_layout(host.data());
}

std::vector<float> ZeroEngine::host_full_to_layout(const float* full) {
  std::vector<float> out(layout_.total_numel());
  for (const FlatUnit& u : part_.units()) {
    for (std::size_t k = 0; k < u.params.size(); ++k) {
      const int p = u.params[k];
      std::copy_n(full + u.full_offset + u.param_offset[k], layout_.params()[p].numel(), out.begin() + layout_.offset(p));
    }
  }
  return out;
}

// A frozen engine's compute weights in layout order, as fp32.
std::vector<float> ZeroEngine::frozen_weights_to_layout() {
  const bool sharded = cfg_.stage == 3;
  View1<float> w = sharded ? shard_weights_ : full_weights_;
  if (bf16_weights_) {
    const View1<bf16>& src = sharded ? shard_weights_bf16_ : full_weights_bf16_;
    w = zeros("zero_widened_weights", src.extent(0));
    to_f32(src, w);
  }
  std::vector<float> out = sharded ? owned_to_layout(w) : full_to_layout(w);
  if (nf4_) {
    for (std::size_t p = 0; p < layout_.params().size(); ++p) {
      if (!nf4_->holds(static_cast<int>(p))) continue;
      View1<float> d("zero_nf4_read", layout_.params()[p].numel());
      nf4_->read(static_cast<int>(p), d);
      auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d);
      std::copy_n(host.data(), host.extent(0), out.begin() + layout_.offset(static_cast<int>(p)));
    }
  }
  return out;
}

std::vector<float> ZeroEngine::gather_master() {
  if (frozen_only_) return frozen_weights_to_layout();
  std::vector<float> out = owned_to_layout(master_);
  if (frozen_) {
    const std::vector<float> base = frozen_->gather_master();
    for (std::size_t p = 0; p < layout_.params().size(); ++p) {
      if (holds(static_cast<int>(p))) continue;
      const std::int64_t off = layout_.offset(static_cast<int>(p));
      std::copy_n(base.begin() + off, layout_.params()[p].numel(), out.begin() + off);
    }
  }
  return out;
}
std::vector<float> ZeroEngine::gather_trainable() { return frozen_only_ ? std::vector<float>(layout_.total_numel(), 0.f) : owned_to_layout(master_); }
std::vector<float> ZeroEngine::gather_grads() {
  apply_pending_clip();
  return owned_to_layout(grad_owned_);
}

void ZeroEngine::track_peaks() {
  std::int64_t g = 0, ug = 0;  // g in bytes
  for (const auto& v : gathered_) g += 4 * static_cast<std::int64_t>(v.extent(0));
  for (const auto& v : gathered_bf16_) g += 2 * static_cast<std::int64_t>(v.extent(0));
  for (const auto& v : unit_grads_) ug += static_cast<std::int64_t>(v.extent(0));
  if (buckets_) ug += buckets_->held_elements();
  peak_gathered_ = std::max(peak_gathered_, g);
  peak_unit_grads_ = std::max(peak_unit_grads_, 4 * ug);
}

std::vector<ZeroEngine::OwnedSlice> ZeroEngine::owned_slices() const {
  std::vector<OwnedSlice> out;
  for_each_owned_slice([&](int param, std::int64_t first, std::int64_t owned_offset, std::int64_t length) {
    out.push_back({layout_.offset(param) + first, owned_offset, length});
  });
  return out;
}

int ZeroEngine::first_nonfinite_param() const { return first_nonfinite_in(master_); }

int ZeroEngine::first_nonfinite_grad_param() const { return first_nonfinite_in(grad_owned_); }

int ZeroEngine::first_nonfinite_in(View1<float> owned) const {
  int first = -1;
  for_each_owned_slice([&](int param, std::int64_t, std::int64_t owned_offset, std::int64_t length) {
    if (first >= 0 && param >= first) return;
    const Unmanaged1<const float> part(owned.data() + owned_offset, static_cast<std::size_t>(length));
    if (!all_finite(part)) first = first < 0 ? param : std::min(first, param);
  });
  return first;
}

void ZeroEngine::restore(long steps_taken) {
  step_ = steps_taken;
  if (frozen_) frozen_->drain_gathers();
  drain_gathers();
  refresh_compute_weights();
}

void ZeroEngine::set_overlap_comm(bool on) {
  cfg_.overlap_comm = on;
  if (buckets_) buckets_->set_overlap(on);
}

bool ZeroEngine::writes_checkpoint() const {
  const bool first_copy = !replica_ || replica_->rank() == 0;
  return first_copy && (cfg_.stage != 0 || rank_ == 0);  // at stage 0 every rank holds everything
}

MemoryReport ZeroEngine::memory() const {
  MemoryReport m;
  const bool aliased = full_weights_.data() == master_.data();  // counted once, as optimizer state
  m.weights = 4 * static_cast<std::int64_t>((aliased ? 0 : full_weights_.extent(0)) + shard_weights_.extent(0)) +
              2 * static_cast<std::int64_t>(full_weights_bf16_.extent(0) + shard_weights_bf16_.extent(0));
  m.grads = 4 * static_cast<std::int64_t>(full_grads_.extent(0) + (cfg_.stage == 0 ? 0 : grad_owned_.extent(0)));
  m.optimizer = 4 * static_cast<std::int64_t>(master_.extent(0) + exp_avg_.extent(0) + exp_avg_sq_.extent(0));
  m.peak_gathered = peak_gathered_;
  m.peak_unit_grads = peak_unit_grads_;
  m.pooled = pool_.held_bytes();
  if (nf4_) {
    m.nf4_weights = nf4_->storage_bytes();
    m.weights += m.nf4_weights;
    // Tracked apart from the units' peak (stages 0-2 gather no units): the sum bounds their joint peak.
    m.peak_nf4_transient = nf4_->peak_transient_bytes();
    m.peak_gathered += m.peak_nf4_transient;
  }
  if (frozen_only_) m.frozen_weights = m.weights;
  if (frozen_) {  // the frozen part's peaks may come at other times: their sum bounds the true peak
    const MemoryReport f = frozen_->memory();
    m.weights += f.weights;
    m.frozen_weights = f.weights;
    m.nf4_weights = f.nf4_weights;
    m.peak_nf4_transient = f.peak_nf4_transient;
    m.grads += f.grads;
    m.optimizer += f.optimizer;
    m.peak_gathered += f.peak_gathered;
    m.peak_unit_grads += f.peak_unit_grads;
    m.pooled += f.pooled;
  }
  return m;
}

}  // namespace shardft
