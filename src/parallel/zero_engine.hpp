#pragma once
// The ZeRO sharding engine: the model's ParamSource and GradSink over a group of N data-parallel
// ranks, assembled once from the plan out of parts that own their state (parallel/zero/):
//   a weight store (the compute weights: replicated at stages 0-2, sharded and gathered per block at
//     stage 3, with qwZ, hpZ and prefetch),
//   a gradient reducer (all-reduce at stage 0, local accumulation then bucketed reduce-scatter at
//     stage 1, bucketed or int4 reduce-scatter as produced at stages 2-3; under hybrid sharding the sum
//     over the model's copies),
//   an optimizer shard (the owned region's fp32 master weights, AdamW moments, norm and clip),
//   and, where the layout has frozen parameters (LoRA's base; QLoRA's NF4 matrices), a frozen store
//     (weights only).
// The engine calls down into them and never asks which stage it runs; the model tells it the pass at
// each acquire and release, and the trainer the micro-batch (parallel/zero/step_protocol.hpp).
//   stage 0: everything replicated; the step's gradient is all-reduced once, after the last micro-batch.
//   stage 1: master weights and AdamW state sharded; gradients accumulated locally and reduce-scattered
//            in the last micro-batch's backward (in buckets, as at stage 2); updated weights all-gathered.
//   stage 2: gradients sharded as they are produced: each unit's gradient joins a reduction bucket when
//            its block's backward is done; a full bucket's reduce-scatter runs while backward goes on,
//            and no full-size gradient outlives its bucket's reduction.
//   stage 3: weights sharded too: each block's units are all-gathered before its forward and again
//            before its backward (the next block, or more within prefetch_elements, prefetched with
//            nonblocking gathers), released after.
// Every rank computes the same step as one rank processing the whole global batch.
// Compute weights are held in the compute dtype: bf16 compute keeps them as bf16 (half the bytes; the
// model's GEMMs read them as they are), fp16 compute as fp16 values in fp32 storage (their gathers are
// fp32), except with qwZ, whose int8 gathers dequantize into fp32. Master weights, gradients and AdamW
// state are fp32 always. grad() of a frozen parameter is an empty view (the model computes none).
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "config/model_config.hpp"
#include "model/decoder.hpp"
#include "parallel/buffer_pool.hpp"
#include "parallel/flat_partition.hpp"
#include "parallel/grad_buckets.hpp"
#include "parallel/zero/nf4_weights.hpp"
#include "parallel/parallel_plan.hpp"
#include "parallel/zero/frozen_store.hpp"
#include "parallel/zero/grad_reducer.hpp"
#include "parallel/zero/optimizer_shard.hpp"
#include "parallel/zero/owned_region.hpp"
#include "parallel/zero/step_protocol.hpp"
#include "parallel/zero/weight_store.hpp"
#include "parallel/zero/zero_config.hpp"

namespace shardft {

class ZeroEngine : public ParamSource, public GradSink {
 public:
  // The plan's shard group splits one copy of the model; its replica group (hybrid sharding) holds the
  // ranks with the same shard in the other copies and all-reduces the gradient shards once per step;
  // hpZ and qgZ use its ZeRO++ groups. The plan (a cheap copy) is kept.
  ZeroEngine(const ParamLayout& layout, const ZeroConfig& cfg, const ParallelPlan& plan);
  ZeroEngine(const ZeroEngine&) = delete;
  ZeroEngine& operator=(const ZeroEngine&) = delete;

  // Seeded initialisation: each rank creates only the master slice it owns (same values as
  // init_params on one rank), then the compute weights are refreshed. `which` picks the parameters
  // (ParamSet::trainable: LoRA's factors only, when a pretrained base will fill the frozen ones).
  void init_weights(const ModelConfig& model, std::uint64_t seed, ParamSet which = ParamSet::all);
  // Every rank passes the whole model in layout order; each keeps its slice.
  void load_weights(const std::vector<float>& layout_order);
  // Pretrained weights read piecewise: read(param, first, count, out) must write elements
  // [first, first + count) of parameter `param` (row-major, as ParamLayout shapes it). Each rank asks
  // only for what it owns, so no rank ever holds the whole model beyond what its stage keeps anyway.
  // `which` picks the parameters read (ParamSet::frozen: a LoRA base from a pretrained model; the others
  // keep their values).
  using WeightSliceReader = OwnedSliceReader;
  // `stored` gives the QLoRA matrices a checkpoint holds already as NF4 (Nf4Weights::load).
  void load_weights(const WeightSliceReader& read, ParamSet which = ParamSet::all,
                    const Nf4Weights::StoredNf4& stored = {});

  // One optimizer step: begin_step, then per micro-batch begin_micro_batch({index, count}) / the
  // model's forward_backward / end_micro_batch, then clip_grad_norm and optimizer_step, each in its
  // phase (parallel/zero/step_protocol.hpp; a call out of order is a logic_error).
  void begin_step();
  void begin_micro_batch(MicroBatch mb);
  void end_micro_batch();
  // The global gradient norm over every shard, squared, into norm_sq(0) (a device scalar), then the
  // gradient clipped to max_norm (<= 0: not clipped), all on the device: nothing is read back. The
  // clip is deferred into optimizer_step's one AdamW launch (parallel/zero/optimizer_shard.hpp);
  // whatever else reads the gradient (gather_grads, scale_grads, a second clip_grad_norm) sees it
  // clipped.
  void clip_grad_norm(double max_norm, Unmanaged1<double> norm_sq);
  // The step's reduced gradient (this rank's owned part) times `factor`, on the device: fp16's unscaling
  // by 1 / loss scale, before clip_grad_norm (after it, the pending clip is applied first). A step whose
  // optimizer_step is skipped (fp16 overflow) changes nothing: the next step starts a new sum (its stale
  // values never read: parallel/zero/grad_sum_state.hpp).
  void scale_grads(float factor);
  void optimizer_step(double lr);

  // ParamSource
  void acquire(int block, Pass pass) override;
  Unmanaged1<const float> weight(int param) override;  // bf16 weights: a widened copy (norms, biases)
  Unmanaged1<const bf16> weight_bf16(int param) override;
  void release(int block, Pass pass) override;
  // GradSink
  Unmanaged1<float> grad(int param) override;
  GradWrite grad_to_write(int param) override;
  void block_done(int block) override;

  // The whole model in layout order on every rank (collective): master weights (the compute weights of
  // frozen parameters), or the step's reduced (and clipped) gradient (zero for frozen parameters).
  // keep false: a rank that only takes part in the collectives gets an empty vector and never holds a
  // copy of the model (the export's other ranks: only the writer holds one, as FSDP's rank0_only).
  std::vector<float> gather_master(bool keep = true);
  std::vector<float> gather_trainable(bool keep = true);  // the trainable parameters' only (others 0)
  std::vector<float> gather_grads();
  // The master weights (frozen parameters: their compute weights, NF4 dequantized) one block at a time,
  // blocks in order (collective): fn(block, window) with the block's own parameters
  // (model/layout_window.hpp) on a rank that keeps them; the others take part and hold nothing. Memory
  // holds one block, never the model: what the final export streams to disk.
  void for_each_master_block(bool keep, const std::function<void(int block, LayoutWindow& values)>& fn);

  // Checkpointing (the trainable parameters): what this rank owns, in layout coordinates (the offset of an element in
  // ParamLayout order, independent of world size and padding), and the state itself.
  struct OwnedSlice {
    std::int64_t layout_offset, owned_offset, length;
  };
  std::vector<OwnedSlice> owned_slices() const;
  // The state itself (after an overlapped update has finished writing it, on the compute stream).
  View1<float> master() const { return settled(optimizer_->master()); }
  View1<float> exp_avg() const { return settled(optimizer_->exp_avg()); }
  View1<float> exp_avg_sq() const { return settled(optimizer_->exp_avg_sq()); }
  // The first parameter (layout order) whose master weights on this rank hold a NaN or Inf; -1 when none.
  // Local (no collective), a device reduction per owned slice: for reporting a failed step.
  int first_nonfinite_param() const;
  // The same for the step's reduced gradient (after end_micro_batch of the last micro-batch). A pending
  // clip does not change the answer: its factor is in [0, 1], so finite stays finite and inf or NaN
  // stays non-finite.
  int first_nonfinite_grad_param() const;
  // After master and moments were filled from a checkpoint: the step count, and compute weights.
  void restore(long steps_taken);
  // Whether this rank's copy of the state is the one to save (replicas and stage-0 ranks hold copies).
  bool writes_checkpoint() const;

  // Overlapped (default) or blocking gradient reduction, e.g. to measure what the overlap gains.
  void set_overlap_comm(bool on) { reducer_->set_overlap(on); }
  // ZeRO++ (qwZ, qgZ) adds the number of non-finite values it quantizes into counter(0) on the device,
  // for the caller to read back and report once per step. Without one (the default) each quantization
  // reads its count back on the host and throws before sending (comm/quantized_collectives.hpp).
  void set_nonfinite_counter(Unmanaged1<double> counter);
  const GradBuckets* grad_buckets() const { return reducer_->buckets(); }  // nullptr at stage 0 and with qgZ

  MemoryReport memory() const;
  const BufferPool& buffer_pool() const { return pool_; }
  const FlatPartition& partition() const { return part_; }  // the trainable parameters'
  // nullptr without frozen parameters (the engine then holds an empty store)
  const FrozenStore* frozen_part() const { return layout_.has_frozen() ? frozen_.get() : nullptr; }
  int stage() const { return cfg_.stage; }
  Communicator& group() { return group_; }
  Communicator* replica_group() { return replica_; }
  long steps_taken() const { return optimizer_->steps(); }
  StepPhase step_phase() const { return protocol_.phase(); }
  // Where the overlapped optimizer update runs (optimizer_overlap); empty when it is not overlapped.
  std::string optimizer_overlap_description() const { return optimizer_->overlap_description(); }

 private:
  bool holds(int param) const { return part_.unit_of(param) >= 0; }
  View1<float> settled(View1<float> state) const {
    optimizer_->wait_for_update();
    return state;
  }
  void progress();
  void drain_gathers();
  void apply_pending_clip() { optimizer_->apply_pending_clip(reducer_->owned()); }
  int first_nonfinite_in(View1<float> owned) const;
  std::vector<float> owned_to_layout(View1<float> owned, bool keep = true);  // collective where sharded

  const ParamLayout& layout_;
  ZeroConfig cfg_;
  ParallelPlan plan_;
  Communicator& group_;    // the plan's shard group
  Communicator* replica_;  // nullptr unless hybrid sharding with more than one copy
  FlatPartition part_;     // the trainable parameters (all of them without frozen ones)
  OwnedRegion owned_;
  BufferPool pool_;        // gathered units, unit gradients, bucket staging (before the parts using it)
  std::unique_ptr<OptimizerShard> optimizer_;
  std::unique_ptr<WeightStore> weights_;
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<FrozenStore> frozen_;  // empty where the layout has no frozen parameters
  StepProtocol protocol_;
};

}  // namespace shardft
