#include "parallel/zero/grad_reducer.hpp"

#include <utility>

#include "comm/cast_collectives.hpp"
#include "parallel/zero/grad_reducer_variants.hpp"

namespace shardft {

void all_reduce_gradient(Communicator& group, View1<float> buf, bool bf16) {
  if (bf16) {
    all_reduce_as_bf16(group, buf.data(), buf.extent(0));
  } else {
    group.all_reduce(buf.data(), buf.data(), buf.extent(0), DType::f32, ReduceOp::sum);
  }
}

Unmanaged1<float> full_unit_slice(const FlatPartition& part, View1<float> full, int param) {
  const FlatUnit& u = part.units()[part.unit_of(param)];
  const std::int64_t n = part.numel_of(param);
  return Unmanaged1<float>(full.data() + u.full_offset + part.offset_in_unit(param), n);
}

namespace {

// Hybrid sharding: the copies of the model sum their reduced shards once per step. Blocking: it needs
// every bucket of every micro-batch summed, and nothing computes after it to overlap with.
class ReplicaSum : public GradReducer {
 public:
  ReplicaSum(std::unique_ptr<GradReducer> inner, Communicator& replica, bool bf16)
      : inner_(std::move(inner)), replica_(replica), bf16_(bf16) {}
  void begin_step() override { inner_->begin_step(); }
  GradWrite grad(int param, GradUse use) override { return inner_->grad(param, use); }
  void unit_done(int unit, const MicroBatch& mb) override { inner_->unit_done(unit, mb); }
  void end_micro_batch(const MicroBatch& mb) override {
    inner_->end_micro_batch(mb);
    if (mb.last()) all_reduce_gradient(replica_, inner_->owned(), bf16_);
  }
  void progress() override { inner_->progress(); }
  void set_overlap(bool on) override { inner_->set_overlap(on); }
  void set_nonfinite_counter(Unmanaged1<double> c) override { inner_->set_nonfinite_counter(c); }
  const GradBuckets* buckets() const override { return inner_->buckets(); }
  View1<float> owned() const override { return inner_->owned(); }
  std::int64_t persistent_elements() const override { return inner_->persistent_elements(); }
  std::int64_t peak_transient_elements() const override { return inner_->peak_transient_elements(); }

 private:
  std::unique_ptr<GradReducer> inner_;
  Communicator& replica_;
  bool bf16_;
};

std::unique_ptr<GradReducer> pick_reducer(const FlatPartition& part, const ZeroConfig& cfg, const ParallelPlan& plan,
                                          BufferPool& pool) {
  const GradBucketOptions opt{cfg.reduce_bucket_elements, cfg.bf16_gradients, cfg.overlap_comm};
  if (cfg.stage == 0) return make_all_reduce_reducer(part, plan.shard(), cfg.bf16_gradients);
  if (cfg.stage == 1) return make_accumulate_then_scatter_reducer(part, plan.shard(), opt, pool);
  if (cfg.quantized_gradients) return make_int4_scatter_reducer(part, plan, cfg.quantization_block, pool);
  return make_bucketed_scatter_reducer(part, plan.shard(), opt, pool);
}

}  // namespace

std::unique_ptr<GradReducer> make_grad_reducer(const FlatPartition& part, const ZeroConfig& cfg,
                                               const ParallelPlan& plan, BufferPool& pool) {
  std::unique_ptr<GradReducer> r = pick_reducer(part, cfg, plan, pool);
  Communicator* replica = plan.replica();
  if (replica && replica->size() > 1) r = std::make_unique<ReplicaSum>(std::move(r), *replica, cfg.bf16_gradients);
  return r;
}

}  // namespace shardft
