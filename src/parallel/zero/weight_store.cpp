#include "parallel/zero/weight_store.hpp"

#include <stdexcept>

#include "kernels/elementwise.hpp"
#include "kernels/runs_cast.hpp"
#include "parallel/zero/weight_store_variants.hpp"

namespace shardft {

WeightStorage weight_storage(const ZeroConfig& cfg) {
  // qwZ's int8 gathers dequantize into fp32 (values that are not bf16), so its weights stay fp32.
  return cfg.dtype == ComputeDtype::bf16 && !cfg.quantized_weights ? WeightStorage::bf16 : WeightStorage::f32;
}

RunCast weight_rounding(const ZeroConfig& cfg) {
  if (cfg.dtype == ComputeDtype::bf16) return RunCast::round_bf16;
  if (cfg.dtype == ComputeDtype::fp16) return RunCast::round_fp16;
  return RunCast::copy;
}

WeightStore::WeightStore(const FlatPartition& part, const OwnedRegion& owned, BufferPool& pool, RunCast cast,
                         bool in_full_buffer)
    : part_(part),
      owned_(owned),
      pool_(pool),
      cast_(cast),
      widened_(part.num_params()),
      compute_runs_(owned.compute_runs(in_full_buffer)),
      write_runs_(make_flat_runs(compute_runs_)) {}

void WeightStore::write_from(View1<float> master) {
  if (is_copy()) cast_to_compute(master, write_runs_);
  share();
}

void WeightStore::write_unit_from(std::size_t unit, View1<float> piece) {
  if (!is_copy()) throw std::logic_error("write_unit_from: these compute weights are the master weights");
  const FlatRun& run = compute_runs_.at(unit);
  if (static_cast<std::int64_t>(piece.extent(0)) != run.length) {
    throw std::invalid_argument("write_unit_from: the piece does not hold the unit's owned segment");
  }
  cast_to_compute(piece, make_flat_runs({FlatRun{0, run.length, run.begin + run.value}}));
}

void WeightStore::cast_to_compute(View1<float> src, const FlatRuns& runs) {
  if (owned_buffer().storage() == WeightStorage::bf16) {
    cast_runs(src, runs, owned_target().bf16_storage);
  } else {
    cast_runs(src, runs, cast_, owned_target().f32_storage);
  }
}

void WeightStore::share() {
  for (View1<float>& w : widened_) pool_.give(w);  // copies of the old weights
}

Unmanaged1<const float> WeightStore::weight(int param) {
  std::int64_t offset = 0;
  const WeightBuffer& b = buffer_of(param, &offset);
  const std::int64_t n = part_.numel_of(param);
  if (b.storage() != WeightStorage::bf16) return b.f32(offset, n);
  // The model reads its matrices through weight_bf16; the norm weights and biases it reads here are
  // widened once and kept until the unit is released (sharded) or the weights change.
  View1<float>& w = widened_[param];
  if (w.extent(0) == 0) {
    w = pool_.take(n, "zero_widened");
    to_f32(b.bf16s(offset, n), w);
  }
  return Unmanaged1<const float>(w.data(), n);
}

Unmanaged1<const bf16> WeightStore::weight_bf16(int param) {
  std::int64_t offset = 0;
  const WeightBuffer& b = buffer_of(param, &offset);
  return b.bf16s(offset, part_.numel_of(param));
}

std::unique_ptr<WeightStore> make_weight_store(const FlatPartition& part, const OwnedRegion& owned, const ZeroConfig& cfg,
                                               const ParallelPlan& plan, BufferPool& pool, View1<float> master) {
  if (cfg.stage == 3) return make_sharded_weights(part, owned, cfg, plan, pool);
  // Stage 0 owns every unit at its full offset, so in fp32 the compute weights are the master weights
  // themselves: one copy of the model fewer (16 bytes a parameter, as PyTorch DDP + Adam).
  const bool master_serves = cfg.stage == 0 && cfg.dtype == ComputeDtype::fp32 && master.extent(0) > 0;
  return make_replicated_weights(part, owned, cfg, plan.shard(), pool, master_serves ? master : View1<float>());
}

}  // namespace shardft
