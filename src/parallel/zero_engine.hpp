#pragma once
// The ZeRO sharding engine: the model's ParamSource and GradSink over a group of N data-parallel
// ranks, and the owner of the fp32 master weights and AdamW state.
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
// Compute weights (the stage 0-2 copy, stage 3's shards and gathered units) are held in the compute
// dtype: bf16 compute keeps them as bf16 (half the bytes; the model's GEMMs read them as they are),
// fp16 compute as fp16 values in fp32 storage (their gathers are fp32), except with qwZ, whose int8
// gathers dequantize into fp32. Master weights, gradients and AdamW state
// are fp32 always.
// Frozen parameters (LoRA's base, ParamSpec::frozen): the engine holds the trainable ones as above and
// the frozen ones in a second ZeroEngine over the same blocks (FlatPartition's ParamSet), which keeps
// compute weights only: no master copy, gradient, AdamW state or reduction; at stage 3 its shards are
// gathered per block with the trainable ones. weight() and acquire/release serve both; grad() of a
// frozen parameter is an empty view (the model computes none). With QLoRA (ParamSpec::nf4)
// the frozen engine holds the decoder linears' matrices as NF4 blocks (Nf4Weights; at stage 3 their bytes
// sharded and gathered per block, the next block's prefetched with the units) and the rest of the frozen parameters in its partition as above.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "config/model_config.hpp"
#include "kernels/adamw.hpp"
#include "kernels/flat_runs.hpp"
#include "model/decoder.hpp"
#include "parallel/buffer_pool.hpp"
#include "parallel/flat_partition.hpp"
#include "parallel/grad_buckets.hpp"
#include "parallel/nf4_weights.hpp"
#include "parallel/parallel_plan.hpp"

namespace shardft {

struct ZeroConfig {
  int stage = 0;
  ComputeDtype dtype = ComputeDtype::fp32;   // weights travel in it (bf16 gathers are lossless then)
  bool bf16_gradients = false;               // communication_data_type bf16: reduce gradients as bf16
  bool quantized_weights = false;            // qwZ: stage-3 gathers as int8 blocks
  bool quantized_gradients = false;          // qgZ: stage 2/3 reduce-scatter as int4, hierarchical
  int hpz_partition_size = 1;                // hpZ: > 1 keeps a secondary copy for backward gathers in groups this big
  int quantization_block = 64;
  // Communication buckets, in elements (parallel/grad_buckets.hpp). Gradients: each bucket's
  // reduce-scatter starts when it fills during backward (stages 1-3; stage 1 in the last micro-batch);
  // <= 0 is one unit (layer block) per bucket. Not qgZ, whose reduction stays blocking per unit.
  std::int64_t reduce_bucket_elements = 0;
  bool overlap_comm = true;                  // false: each bucket is waited for when it starts (for A/B runs)
  // Stages 1-2: elements of updated-weight gathers in flight at once after the optimizer step (<= 0: one unit).
  std::int64_t allgather_bucket_elements = 0;
  // Stage 3: elements gathered ahead of the block being computed; the next block is always prefetched,
  // further blocks while the weights gathered ahead stay within this.
  std::int64_t prefetch_elements = 0;
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_epsilon = 1e-8, weight_decay = 0.0;
};

// Bytes a rank holds, by kind (persistent), and the largest transient gathers / gradient units seen.
struct MemoryReport {
  std::int64_t weights = 0, grads = 0, optimizer = 0;
  std::int64_t frozen_weights = 0;  // the part of `weights` that holds frozen parameters
  std::int64_t nf4_weights = 0;     // the part of `frozen_weights` held as NF4 blocks (QLoRA)
  std::int64_t peak_gathered = 0, peak_unit_grads = 0;
  // The part of peak_gathered that is QLoRA's (Nf4Weights): NF4 bytes gathered at stage 3 for the block
  // computing and the one prefetched, and the block's matrices dequantized in the compute dtype.
  std::int64_t peak_nf4_transient = 0;
  std::int64_t pooled = 0;  // transient buffers held for reuse between blocks and steps (buffer_pool.hpp)
};

class ZeroEngine : public ParamSource, public GradSink {
 public:
  // The plan's shard group splits one copy of the model; its replica group (hybrid sharding) holds the
  // ranks with the same shard in the other copies and all-reduces the gradient shards once per step;
  // hpZ and qgZ use its ZeRO++ groups. The plan (a cheap copy) is kept.
  ZeroEngine(const ParamLayout& layout, const ZeroConfig& cfg, const ParallelPlan& plan);

  // Seeded initialisation: each rank creates only the master slice it owns (same values as
  // init_params on one rank), then the compute weights are refreshed.
  void init_weights(const ModelConfig& model, std::uint64_t seed);
  // Every rank passes the whole model in layout order; each keeps its slice.
  void load_weights(const std::vector<float>& layout_order);
  // Pretrained weights read piecewise: read(param, first, count, out) must write elements
  // [first, first + count) of parameter `param` (row-major, as ParamLayout shapes it). Each rank asks
  // only for what it owns, so no rank ever holds the whole model beyond what its stage keeps anyway.
  // `which` picks the parameters read (ParamSet::frozen: a LoRA base from a pretrained model; the others
  // keep their values).
  using WeightSliceReader = std::function<void(int param, std::int64_t first, std::int64_t count, float* out)>;
  // `stored` gives the QLoRA matrices a checkpoint holds already as NF4 (Nf4Weights::load).
  void load_weights(const WeightSliceReader& read, ParamSet which = ParamSet::all,
                    const Nf4Weights::StoredNf4& stored = {});

  // One optimizer step: begin_step, then per micro-batch begin_micro_batch(is_last) / the model's
  // forward_backward / end_micro_batch, then clip_grad_norm and optimizer_step.
  void begin_step();
  void begin_micro_batch(bool last);
  void end_micro_batch();
  // The global gradient norm over every shard, squared, into norm_sq(0) (a device scalar), then the
  // gradient clipped to max_norm (<= 0: not clipped), all on the device: nothing is read back.
  // The clip is deferred: its factor is computed on the device here, and optimizer_step's one AdamW
  // launch multiplies each gradient element by it as it reads it, so the step reads the gradient once
  // (no pass that scales it in place). Whatever else reads the gradient (gather_grads, scale_grads, a
  // second clip_grad_norm), before or after the step, first applies the factor in place and so sees
  // the clipped gradient, the same bits clipping here would have left.
  void clip_grad_norm(double max_norm, Unmanaged1<double> norm_sq);
  // The step's reduced gradient (this rank's owned part) times `factor`, on the device: fp16's unscaling
  // by 1 / loss scale, before clip_grad_norm (after it, the pending clip is applied first). A step whose
  // optimizer_step is skipped (fp16 overflow) changes nothing: the next begin_step zeroes the gradient.
  void scale_grads(float factor);
  void optimizer_step(double lr);

  // ParamSource
  void acquire(int block) override;
  Unmanaged1<const float> weight(int param) override;  // bf16 weights: a widened copy (norms, biases)
  Unmanaged1<const bf16> weight_bf16(int param) override;
  void release(int block) override;
  // GradSink
  Unmanaged1<float> grad(int param) override;
  void block_done(int block) override;

  // The whole model in layout order on every rank (collective): master weights (the compute weights of
  // frozen parameters), or the step's reduced (and clipped) gradient (zero for frozen parameters).
  std::vector<float> gather_master();
  std::vector<float> gather_trainable();  // master weights of the trainable parameters only (others 0)
  std::vector<float> gather_grads();

  // Checkpointing (the trainable parameters): what this rank owns, in layout coordinates (the offset of an element in
  // ParamLayout order, independent of world size and padding), and the state itself.
  struct OwnedSlice {
    std::int64_t layout_offset, owned_offset, length;
  };
  std::vector<OwnedSlice> owned_slices() const;
  View1<float> master() const { return master_; }
  View1<float> exp_avg() const { return exp_avg_; }
  View1<float> exp_avg_sq() const { return exp_avg_sq_; }
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
  void set_overlap_comm(bool on);
  // ZeRO++ (qwZ, qgZ) adds the number of non-finite values it quantizes into counter(0) on the device,
  // for the caller to read back and report once per step. Without one (the default) each quantization
  // reads its count back on the host and throws before sending (comm/quantized_collectives.hpp).
  void set_nonfinite_counter(Unmanaged1<double> counter) {
    nonfinite_ = counter;
    if (frozen_) frozen_->nonfinite_ = counter;
  }
  const GradBuckets* grad_buckets() const { return buckets_.get(); }  // nullptr at stage 0 and with qgZ

  MemoryReport memory() const;
  const BufferPool& buffer_pool() const { return pool_; }
  const FlatPartition& partition() const { return part_; }  // the trainable parameters'
  const ZeroEngine* frozen_part() const { return frozen_.get(); }  // nullptr without frozen parameters
  const Nf4Weights* nf4() const { return nf4_.get(); }  // the frozen part's, with QLoRA; else nullptr
  int stage() const { return cfg_.stage; }
  Communicator& group() { return group_; }
  Communicator* replica_group() { return replica_; }
  long steps_taken() const { return step_; }

 private:
  struct OwnedSegment {            // a piece of this rank's owned region
    std::int64_t owned_offset, full_offset, length;
  };
  // fn(param, first element of the param, offset in the owned region, length) for every piece of a
  // parameter this rank owns.
  // The engine of one ParamSet; the public constructor makes the trainable one and, when the layout has
  // frozen parameters, a frozen one it owns.
  ZeroEngine(const ParamLayout& layout, const ZeroConfig& cfg, const ParallelPlan& plan, ParamSet set);
  template <class Fn>
  void for_each_owned_slice(Fn&& fn) const;
  std::vector<float> full_to_layout(View1<float> full);
  std::vector<float> host_full_to_layout(const float* full);  // full: the flat units on the host
  std::vector<float> frozen_weights_to_layout();
  bool holds(int param) const { return part_.unit_of(param) >= 0; }
  void make_runs();
  // The compute weights from the master weights: written (refresh_compute_weights; the optimizer step
  // writes them as it updates), then shared with the other ranks where they are gathered in place
  // (stages 1-2).
  void refresh_compute_weights();
  void share_compute_weights();
  bool has_compute_copy() const;  // compute weights apart from the master weights (all but fp32 stage 0)
  ComputeWeights compute_weights();
  void apply_pending_clip();
  int first_nonfinite_in(View1<float> owned) const;
  void drain_gathers();
  void gather_unit(int unit, bool nonblocking);
  void keep_secondary_copy(int unit);
  void reduce_unit_grad_int4(int unit, const float* full_unit_grad);
  void prefetch_after(int block);
  void progress();
  void all_reduce_grads(Communicator& group, View1<float> buf);
  std::vector<float> owned_to_layout(View1<float> owned);
  void track_peaks();
  bool is_gathered(int unit) const;
  void give_back_gathered(int unit);
  void check_acquired(int param) const;

  const ParamLayout& layout_;
  ZeroConfig cfg_;
  ParallelPlan plan_;
  Communicator& group_;    // the plan's shard group
  Communicator* replica_;  // nullptr unless hybrid sharding with more than one copy
  ParamSet set_;
  bool frozen_only_;  // this engine holds frozen parameters: compute weights only
  FlatPartition part_;
  int rank_, size_;
  std::vector<OwnedSegment> owned_;
  // Device tables (kernels/flat_runs.hpp) made once with the partition, so that the optimizer step is one
  // launch and the refresh another, however many parameters and units there are: decay_runs_ holds the
  // owned parameters' pieces, value 1 where they take weight decay (norms and biases take none: HF
  // Trainer's rule); compute_runs_ the owned region unit by unit, value the offset of its compute
  // weights (0 at stages 0 and 3, where the two share a layout; at stages 1-2 the rank's shard of each
  // unit lies inside the full buffer). update_runs_ (where the compute weights are a copy) holds both
  // for the optimizer step that writes the copy as it updates (kernels/adamw.hpp adamw_copy_runs).
  FlatRuns decay_runs_, compute_runs_, update_runs_;
  std::int64_t owned_numel_ = 0;

  bool bf16_weights_ = false;   // compute weights stored as bf16 (bf16 compute without qwZ)
  View1<float> full_weights_;   // stages 0-2: every unit, compute precision (fp32 storage)
  View1<float> shard_weights_;  // stage 3: this rank's shard of every unit (fp32 storage)
  View1<bf16> full_weights_bf16_, shard_weights_bf16_;  // the same, bf16 storage
  View1<float> full_grads_;     // stages 0-1: the step's whole gradient
  View1<float> grad_owned_;     // the reduced gradient of the owned region (aliases full_grads_ at stage 0)
  View1<float> master_, exp_avg_, exp_avg_sq_;
  View1<float> scratch_shard_;  // qgZ: receives one unit's reduce-scatter
  View1<float> clip_factor_;    // clip_grad_norm's factor (a device scalar), while clip_pending_
  bool clip_pending_ = false;   // grad_owned_ is still to be multiplied by clip_factor_

  BufferPool pool_;                        // gathered units, unit gradients, bucket staging (before buckets_)
  Unmanaged1<double> nonfinite_;           // see set_nonfinite_counter
  std::vector<View1<float>> gathered_;     // stage 3: per unit, while acquired or prefetched (fp32 storage)
  std::vector<View1<bf16>> gathered_bf16_; // the same, bf16 storage
  std::vector<View1<float>> widened_;      // bf16 storage: per param, weight()'s fp32 copy while valid
  std::vector<RequestPtr> pending_;        // stage 3: per unit, a prefetch in flight
  std::vector<int> refcount_;
  std::vector<View1<float>> unit_grads_;   // stages 2-3: per unit, during its block's backward
  std::vector<View1<float>> secondary_;    // hpZ: per unit, this rank's slice of the secondary partition
  std::vector<View1<bf16>> secondary_bf16_;
  std::unique_ptr<GradBuckets> buckets_;   // stages 1-3 without qgZ: the overlapped gradient reduction
  std::vector<char> bucketed_;             // stage 1: units handed to buckets_ this step
  bool last_micro_batch_ = true, forward_ = true;
  long step_ = 0;
  std::int64_t peak_gathered_ = 0, peak_unit_grads_ = 0;
  std::unique_ptr<ZeroEngine> frozen_;     // the frozen parameters' engine, if any
  std::unique_ptr<Nf4Weights> nf4_;        // frozen engine with QLoRA: the NF4 matrices (outside part_)
};

}  // namespace shardft
