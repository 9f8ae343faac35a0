#include "parallel/zero_engine.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/elementwise.hpp"

namespace shardft {

namespace {

// The recipe's combinations are checked by config/, the layout by the plan; these are the engine's
// own preconditions, for callers that build a ZeroConfig by hand.
const ZeroConfig& checked(const ZeroConfig& cfg, const ParallelPlan& plan) {
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
  if (cfg.overlap_optimizer && cfg.stage != 0) {
    throw std::invalid_argument("optimizer_overlap needs zero_stage 0 (stages 1-2 gather the updated shards at once)");
  }
  return cfg;
}

}  // namespace

// The parts, picked once from the stage and the flags; nothing after this asks for them.
ZeroEngine::ZeroEngine(const ParamLayout& layout, const ZeroConfig& cfg, const ParallelPlan& plan)
    : layout_(layout),
      cfg_(checked(cfg, plan)),
      plan_(plan),
      group_(plan_.shard()),
      replica_(plan_.replica() && plan_.replica()->size() > 1 ? plan_.replica() : nullptr),
      part_(layout, group_.size(), layout.has_frozen() ? ParamSet::trainable : ParamSet::all),
      owned_(part_, cfg.stage > 0, group_.rank()),
      optimizer_(std::make_unique<OptimizerShard>(owned_.numel(), cfg, cfg.stage > 0 ? &group_ : nullptr)),
      weights_(make_weight_store(part_, owned_, cfg, plan_, pool_, optimizer_->master())),
      reducer_(make_grad_reducer(part_, cfg, plan_, pool_)),
      frozen_(std::make_unique<FrozenStore>(layout, cfg, plan_)) {
  // The optimizer's tables: the owned pieces with their weight-decay flag, and, where the compute
  // weights are a copy, with their compute offsets too, so that one AdamW launch also refreshes them.
  std::vector<FlatRun> decay;
  std::vector<std::vector<FlatRun>> decay_by_unit(part_.units().size());  // the same, unit by unit
  owned_.for_each_param_slice([&](int param, std::int64_t, std::int64_t owned_offset, std::int64_t length) {
    const FlatRun run{owned_offset, length, layout_.params()[param].takes_weight_decay() ? 1 : 0};
    decay.push_back(run);
    decay_by_unit[static_cast<std::size_t>(part_.unit_of(param))].push_back(run);
  });
  const bool copy = weights_->is_copy();
  const auto update_table = [&](const std::vector<FlatRun>& d) {
    return make_flat_runs(copy ? adamw_copy_runs(d, weights_->compute_runs()) : d);
  };
  optimizer_->set_runs(make_flat_runs(decay), copy ? update_table(decay) : FlatRuns(), copy);
  if (!cfg.overlap_optimizer) return;
  std::vector<FlatRuns> unit_tables;  // in unit (forward) order; empty where a unit owns nothing
  for (const auto& d : decay_by_unit) unit_tables.push_back(update_table(d));
  optimizer_->enable_overlap(std::move(unit_tables), cfg.overlap_gemm_sm_reserve);
}

void ZeroEngine::init_weights(const ModelConfig& model, std::uint64_t seed, ParamSet which) {
  if (which == ParamSet::frozen) throw std::invalid_argument("init_weights: the frozen set alone is never seeded");
  optimizer_->wait_for_update();
  if (which == ParamSet::all) frozen_->init(model, seed);
  init_owned(owned_, layout_, model, seed, optimizer_->master());
  weights_->write_from(optimizer_->master());
}

void ZeroEngine::load_weights(const std::vector<float>& layout_order) {
  if (static_cast<std::int64_t>(layout_order.size()) != layout_.total_numel()) {
    throw std::invalid_argument("load_weights: expected " + std::to_string(layout_.total_numel()) + " values");
  }
  optimizer_->wait_for_update();
  frozen_->load(layout_order);
  load_owned(owned_, layout_, layout_order, optimizer_->master());
  weights_->write_from(optimizer_->master());
}

void ZeroEngine::load_weights(const WeightSliceReader& read, ParamSet which, const Nf4Weights::StoredNf4& stored) {
  optimizer_->wait_for_update();
  if (which != ParamSet::trainable) frozen_->load(read, stored);
  if (which == ParamSet::frozen) return;  // the trainable part holds none of them
  // Parameters not read keep their values (padding is zero either way).
  read_owned(owned_, read, [&](int param) { return in_param_set(layout_.params()[param], which); },
             optimizer_->master());
  weights_->write_from(optimizer_->master());
}

// ---- the step --------------------------------------------------------------------------------------

void ZeroEngine::begin_step() {
  protocol_.begin_step();
  optimizer_->begin_step();  // the clip factor was the last step's
  reducer_->begin_step();
}

void ZeroEngine::begin_micro_batch(MicroBatch mb) { protocol_.begin_micro_batch(mb); }

void ZeroEngine::end_micro_batch() {
  const MicroBatch mb = protocol_.micro_batch();
  protocol_.end_micro_batch();
  reducer_->end_micro_batch(mb);
}

void ZeroEngine::clip_grad_norm(double max_norm, Unmanaged1<double> norm_sq) {
  protocol_.expect(StepPhase::reduced, "clip_grad_norm");
  optimizer_->clip_grad_norm(reducer_->owned(), max_norm, norm_sq);
}

void ZeroEngine::scale_grads(float factor) {
  protocol_.expect(StepPhase::reduced, "scale_grads");
  apply_pending_clip();
  scale_inplace(reducer_->owned(), factor);
}

void ZeroEngine::optimizer_step(double lr) {
  protocol_.end_step();
  // One launch over the owned shard, which also writes the compute weights (the refresh) where they are
  // a copy; then the stages that hold every unit gather the other ranks' shards.
  // Gathered copies hold the old weights, and no gather may read the compute weights now. The frozen
  // weights do not change: what is gathered of them stays.
  weights_->drain();
  optimizer_->step(lr, reducer_->owned(), weights_->owned_target());
  weights_->share();
}

void ZeroEngine::set_nonfinite_counter(Unmanaged1<double> counter) {
  reducer_->set_nonfinite_counter(counter);
  weights_->set_nonfinite_counter(counter);
  frozen_->set_nonfinite_counter(counter);
}

// ---- GradSink --------------------------------------------------------------------------------------

Unmanaged1<float> ZeroEngine::grad(int param) {
  progress();
  if (!holds(param)) return {};  // frozen: no gradient
  return reducer_->grad(param, GradUse::add).values;
}

GradWrite ZeroEngine::grad_to_write(int param) {
  progress();
  if (!holds(param)) return {};
  return reducer_->grad(param, GradUse::write);
}

void ZeroEngine::block_done(int block) {
  protocol_.expect(StepPhase::micro_batch, "block_done");
  // The block's own unit is complete once its block is done: a shared weight (the tied embedding)
  // belongs to the earliest block, which backward reaches last.
  if (part_.units()[block].padded > 0) reducer_->unit_done(block, protocol_.micro_batch());
}

// ---- inspection ------------------------------------------------------------------------------------

std::vector<float> ZeroEngine::gather_master(bool keep) {
  LayoutWindow out{0, gather_trainable(keep)};
  frozen_->fill_layout(out, 0, part_.units().size());
  return std::move(out.values);
}

std::vector<float> ZeroEngine::gather_trainable(bool keep) {
  optimizer_->wait_for_update();
  return owned_to_layout(optimizer_->master(), keep);
}

std::vector<float> ZeroEngine::gather_grads() {
  apply_pending_clip();
  return owned_to_layout(reducer_->owned());
}

void ZeroEngine::for_each_master_block(bool keep, const std::function<void(int block, LayoutWindow& values)>& fn) {
  optimizer_->wait_for_update();
  for (std::size_t block = 0; block < part_.units().size(); ++block) {
    LayoutWindow values = block_layout_window(layout_, static_cast<int>(block), keep);
    owned_.fill_layout(optimizer_->master(), group_, values, block, block + 1);
    frozen_->fill_layout(values, block, block + 1);
    if (keep) fn(static_cast<int>(block), values);
  }
}

std::vector<float> ZeroEngine::owned_to_layout(View1<float> owned, bool keep) {
  LayoutWindow out = whole_layout_window(layout_, keep);
  owned_.fill_layout(owned, group_, out, 0, part_.units().size());
  return std::move(out.values);
}

std::vector<ZeroEngine::OwnedSlice> ZeroEngine::owned_slices() const {
  std::vector<OwnedSlice> out;
  owned_.for_each_param_slice([&](int param, std::int64_t first, std::int64_t owned_offset, std::int64_t length) {
    out.push_back({layout_.offset(param) + first, owned_offset, length});
  });
  return out;
}

int ZeroEngine::first_nonfinite_param() const {
  optimizer_->wait_for_update();
  return first_nonfinite_in(optimizer_->master());
}

int ZeroEngine::first_nonfinite_grad_param() const { return first_nonfinite_in(reducer_->owned()); }

int ZeroEngine::first_nonfinite_in(View1<float> owned) const {
  int first = -1;
  owned_.for_each_param_slice([&](int param, std::int64_t, std::int64_t owned_offset, std::int64_t length) {
    if (first >= 0 && param >= first) return;
    const Unmanaged1<const float> part(owned.data() + owned_offset, static_cast<std::size_t>(length));
    if (!all_finite(part)) first = first < 0 ? param : std::min(first, param);
  });
  return first;
}

void ZeroEngine::restore(long steps_taken) {
  optimizer_->wait_for_update();
  optimizer_->set_steps(steps_taken);
  protocol_.reset();
  drain_gathers();
  weights_->write_from(optimizer_->master());
}

bool ZeroEngine::writes_checkpoint() const {
  const bool first_copy = !replica_ || replica_->rank() == 0;
  return first_copy && (owned_.sharded() || group_.rank() == 0);  // replicated state: every rank holds it all
}

MemoryReport ZeroEngine::memory() const {
  MemoryReport m;
  m.weights = weights_->bytes();
  m.grads = 4 * reducer_->persistent_elements();
  m.optimizer = optimizer_->bytes();
  m.peak_gathered = weights_->peak_gathered_bytes();
  m.peak_unit_grads = 4 * reducer_->peak_transient_elements();
  m.pooled = pool_.held_bytes();
  frozen_->add_to(m);
  return m;
}

}  // namespace shardft
