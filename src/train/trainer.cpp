#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "config/lora_config.hpp"
#include "config/recipe_schema.hpp"
#include "config/zero_buckets.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/fp16.hpp"
#include "kernels/kernel_timer.hpp"
#include "kernels/side_queue.hpp"
#include "config/adapter_lora_keys.hpp"
#include "train/lora_adapter_init.hpp"
#include "infer/pretrained.hpp"
#include "config/recipe_sections.hpp"

namespace shardft {

ModelInputs to_model_inputs(const TokenBatch& b, int vocab_size) {
  return upload_inputs(b.batch, b.seq, b.input_ids, b.position_ids, b.seq_ids, b.targets, vocab_size);
}

ModelInputs to_model_inputs(const TokenBatch& b, int vocab_size, InputBuffers& buffers) {
  return upload_inputs(b.batch, b.seq, b.input_ids, b.position_ids, b.seq_ids, b.targets, vocab_size, buffers);
}

ModelInputs to_model_inputs(const TokenBatch& b) {
  return upload_inputs(b.batch, b.seq, b.input_ids, b.position_ids, b.seq_ids, b.targets);
}

namespace {
// The memory preflight: every rank estimates, all refuse together when one cannot fit.
RankMemoryEstimate checked_memory_estimate(const ModelConfig& model, const ZeroConfig& zero,
                                           const ActivationShape& activations, const ParamLayout& layout,
                                           const ParallelPlan& plan, const RankMemoryBudget& budget) {
  const RankMemoryEstimate need = estimate_rank_memory(model, layout, zero, plan.shard().size(), activations);
  check_rank_memory(need, budget, plan.host_world());
  return need;
}
}  // namespace

Trainer::Trainer(const TrainConfig& cfg, long total_steps, Communicator& dp_group)
    : Trainer(cfg, total_steps, ParallelPlan::over(dp_group)) {}

Trainer::Trainer(const TrainConfig& cfg, long total_steps, const ParallelPlan& plan)
    : cfg_(with_adapter_lora_keys(cfg)),  // an adapter's LoRA keys folded in (config/adapter_lora_keys.hpp)
      plan_(plan),
      memory_budget_(rank_memory_budget(cfg_.max_memory_per_rank, plan.topology().ranks_sharing_memory)),
      group_(plan.world()),
      model_(cfg_.model, compute_dtype(cfg_), lora_spec(cfg_)),
      ignored_weights_(cfg_.model_name_or_path.empty()
                           ? std::vector<std::string>{}
                           : check_pretrained_weights(model_.layout(), cfg_.model_name_or_path)),
      memory_estimate_(checked_memory_estimate(cfg_.model, zero_config(cfg_, SideQueue::separate_queues()), activation_shape(cfg_), model_.layout(), plan,
                                               memory_budget_)),
      engine_(model_.layout(), zero_config(cfg_, SideQueue::separate_queues()), plan) {
  install_kernel_launch_counter();
  model_.set_activation_checkpointing(cfg_.gradient_checkpointing);
  if (lora_spec(cfg_).enabled) model_.set_lora_dropout(cfg_.lora_dropout, cfg_.seed);
  if (cfg_.neftune_noise_alpha > 0) model_.set_neftune(cfg_.neftune_noise_alpha, cfg_.seed);
  model_.set_logits_chunk_tokens(cfg_.logits_chunk_tokens);
  attention_ = configure_attention(model_, cfg_.attn_implementation, cfg_.deterministic_attention);
  // With LoRA the seeded initialisation gives A and B (Kaiming-uniform, zero) and the pretrained model
  // the frozen base, which is therefore never seeded first (that cost as long as the load, and QLoRA
  // quantized the random base too); an adapter then replaces A and B.
  if (cfg_.model_name_or_path.empty()) {
    engine_.init_weights(cfg_.model, cfg_.seed, ParamSet::all);
  } else if (model_.layout().has_frozen()) {
    engine_.init_weights(cfg_.model, cfg_.seed, ParamSet::trainable);
  }
  if (!cfg_.model_name_or_path.empty()) {
    load_pretrained_weights(engine_, model_.layout(), cfg_.model_name_or_path, plan_.host_world());
  }
  if (!cfg_.adapter_path.empty()) load_adapter_factors(engine_, model_.layout(), cfg_.adapter_path);
  schedule_ = LrSchedule{lr_schedule_config(cfg_, total_steps)};
  if (cfg_.fp16) loss_scaler_ = LossScaler(loss_scaler_config(cfg_));
}

Trainer::LedgerTotals Trainer::ledger_totals() const {
  LedgerTotals t;
  for (Communicator* c : plan_.communicators()) {
    t.total += c->ledger().total();
    t.intra += c->ledger().intra_node();
    t.inter += c->ledger().inter_node();
  }
  return t;
}

namespace {

// The step's collectives wait on the device (Communicator::set_deferred_waits) until synchronize(),
// which the step calls before it reads back; an exception leaves them waiting on the host again.
class DeferredWaits {
 public:
  explicit DeferredWaits(const ParallelPlan& plan) : groups_(plan.communicators()) {
    for (Communicator* c : groups_) c->set_deferred_waits(true);
  }
  ~DeferredWaits() {
    for (Communicator* c : groups_) c->set_deferred_waits(false);
  }
  DeferredWaits(const DeferredWaits&) = delete;
  DeferredWaits& operator=(const DeferredWaits&) = delete;
  void synchronize() {
    for (Communicator* c : groups_) c->synchronize();
  }

 private:
  std::vector<Communicator*> groups_;
};

}  // namespace

// The step stays on the device from its first upload to its weight refresh: the loss accumulates in a
// device scalar, is summed over ranks there, and the gradient norm is computed and applied there;
// collectives are waited for on the device. The host waits for the collectives once and reads back,
// in one copy, both values and the count of non-finite values ZeRO++ quantization met (an error:
// counted on the device, so no quantization waits for the host). The token counts the loss is
// normalised by come from the batches on the host and are summed over the host's (MPI) world.
std::string Trainer::first_nonfinite_parameter() {
  // Reduced with max: the earliest parameter p scores n - p, none scores 0.
  const auto& params = model_.layout().params();
  const std::int64_t n = static_cast<std::int64_t>(params.size());
  const int mine = engine_.first_nonfinite_param();
  std::int64_t score = mine >= 0 ? n - mine : 0;
  plan_.host_world().all_reduce(&score, &score, 1, DType::i64, ReduceOp::max);
  return score > 0 ? params[static_cast<std::size_t>(n - score)].name : "";
}

void Trainer::count_targets(const std::vector<TokenBatch>& micro_batches, StepStats& st) {
  std::int64_t counts[2] = {0, 0};  // targets, tokens: known before any backward, summed over ranks
  for (const auto& mb : micro_batches) {
    counts[0] += mb.num_targets();
    counts[1] += mb.real_tokens;  // from the samples' lengths: no pad id needed
  }
  const HostPhase phase("count targets (host collective)");
  plan_.host_world().all_reduce(counts, counts, 2, DType::i64, ReduceOp::sum);
  st.targets = counts[0];
  st.tokens = counts[1];
}

void Trainer::accumulate_micro_batches(const std::vector<TokenBatch>& micro_batches, const StepStats& st,
                                       const Unmanaged1<double>& loss_sum) {
  for (std::size_t m = 0; m < micro_batches.size(); ++m) {
    engine_.begin_micro_batch({static_cast<int>(m), static_cast<int>(micro_batches.size())});
    // Every micro-batch's loss is divided by the global step's target count, so the accumulated and
    // reduced gradient is that of one big batch, however it is split over ranks and micro-batches.
    if (st.targets > 0) {
      ModelInputs in = [&] {
        const HostPhase upload("upload the batch");
        ModelInputs uploaded = to_model_inputs(micro_batches[m], model_.config().vocab_size, inputs_);
        // LoRA dropout's masks and NEFTune's noise are keyed by (sample, position), the same on every
        // parallel layout: the sample ids are uploaded only when either draws any.
        if (model_.lora_dropout() > 0 || model_.neftune_alpha() > 0) {
          upload_sample_ids(uploaded, micro_batches[m].sample_ids, &inputs_);
        }
        return uploaded;
      }();
      model_.forward_backward(in, engine_, engine_, static_cast<double>(st.targets) / st.loss_scale, loss_sum);
    }
    engine_.end_micro_batch();
  }
}

void Trainer::throw_fp16_exhausted(double loss_scale) {
  const auto& params = model_.layout().params();
  const int n = static_cast<int>(params.size());
  const int mine = engine_.first_nonfinite_grad_param();
  int score = mine >= 0 ? n - mine : 0;  // the earliest parameter wins the max, as in first_nonfinite_parameter
  plan_.host_world().all_reduce(&score, &score, 1, DType::i32, ReduceOp::max);
  const int first = n - score;
  throw std::runtime_error(
      "step " + std::to_string(engine_.steps_taken() + loss_scaler_.skipped_steps()) +
      ": the fp16 gradient overflows (inf or NaN) at the minimum loss scale " + format_double(loss_scale) +
      (first < n ? "; first parameter with a non-finite gradient: " + params[static_cast<std::size_t>(first)].name
                 : std::string()) +
      ". Lower min_loss_scale or learning_rate, check this step's data, or use bf16");
}

StepStats Trainer::step(const std::vector<TokenBatch>& micro_batches) {
  const auto t0 = std::chrono::steady_clock::now();
  const LedgerTotals before = ledger_totals();
  const DeviceTraffic traffic_before = device_traffic();
  const GemmCounters gemm_before = gemm_counters();
  const std::int64_t launches_before = kernel_launches(), layer_launches_before = model_.layer_launches();
  StepStats st;
  count_targets(micro_batches, st);

  DeferredWaits waits(plan_);
  const Unmanaged1<double> loss_sum(step_sums_.data(), 1), grad_norm_sq(step_sums_.data() + 1, 1);
  Kokkos::deep_copy(ExecSpace(), step_sums_, 0.0);
  // Only within the step, which reads it back: elsewhere (evaluation, generation) each quantization
  // checks on the host and throws.
  struct CounterScope {
    ZeroEngine& engine;
    ~CounterScope() { engine.set_nonfinite_counter({}); }
  } counter_scope{engine_};
  engine_.set_nonfinite_counter(Unmanaged1<double>(step_sums_.data() + 2, 1));
  // fp16: the loss, and so every gradient flowing back, is scaled (dividing the normaliser scales the
  // gradients only: the loss sum is taken before it).
  st.loss_scale = loss_scaler_.scale();
  engine_.begin_step();
  // LoRA dropout masks are keyed on the optimizer step (and each token's sample and position)
  model_.set_dropout_step(engine_.steps_taken());
  accumulate_micro_batches(micro_batches, st, loss_sum);
  group_.all_reduce(loss_sum.data(), loss_sum.data(), 1, DType::f64, ReduceOp::sum);
  if (loss_scaler_.enabled()) engine_.scale_grads(static_cast<float>(1.0 / st.loss_scale));
  if (poison_next_gradient_) {
    poison_next_gradient_ = false;
    engine_.scale_grads(std::numeric_limits<float>::infinity());
  }
  // The global norm is summed over every shard (and the replicas' reduced gradients), so an inf or NaN
  // anywhere makes it non-finite on every rank alike: the fp16 overflow decision needs no vote.
  engine_.clip_grad_norm(cfg_.max_grad_norm, grad_norm_sq);
  st.learning_rate = schedule_.at(engine_.steps_taken());
  double sums[3] = {0.0, 0.0, 0.0};
  auto read_back = [&](const char* what) {
    const HostSyncPoint wait_here(what);  // the collectives' waits and the copy: one drain of the device
    const HostPhase phase("wait for the device, read back");
    waits.synchronize();  // every collective so far, each within the collective timeout
    // On the compute stream, which is all the sums depend on: a global fence would also wait for an
    // overlapped optimizer update (optimizer_overlap), which the next step's forward overlaps.
    Kokkos::deep_copy(ExecSpace(), Kokkos::View<double*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(sums, 3),
                      step_sums_);
    ExecSpace().fence();
    count_device_copy(what, sizeof(sums));
  };
  if (loss_scaler_.enabled()) {
    // fp16 reads the norm back before the update (one host sync more than bf16): whether to skip it.
    read_back("fp16 overflow check");
    const LossScaler::Outcome outcome = loss_scaler_.update(!std::isfinite(sums[1]));
    if (outcome == LossScaler::Outcome::exhausted) throw_fp16_exhausted(st.loss_scale);
    st.skipped = outcome == LossScaler::Outcome::skip;
  }
  if (!st.skipped) engine_.optimizer_step(st.learning_rate);
  last_step_traffic_ = device_traffic().since(traffic_before);

  read_back("step loss and gradient norm");
  last_step_kernels_ = {gemm_counters().since(gemm_before), kernel_launches() - launches_before,
                        model_.layer_launches() - layer_launches_before,
                        std::max(1, static_cast<int>(micro_batches.size())), device_traffic().since(traffic_before)};
  if (sums[2] > 0 && !st.skipped) {  // a skipped fp16 step discards its gradients, inf or NaN included
    throw std::runtime_error("step " + std::to_string(engine_.steps_taken()) + ": ZeRO++ quantization met " +
                             std::to_string(static_cast<std::int64_t>(sums[2])) +
                             " non-finite values (NaN or Inf) in the weights or gradients it sent (qwZ / qgZ); "
                             "the step's update is invalid");
  }
  st.loss = st.targets > 0 ? sums[0] / static_cast<double>(st.targets) : 0.0;
  st.grad_norm = std::sqrt(sums[1]);
  const LedgerTotals after = ledger_totals();
  st.comm_bytes = after.total - before.total;
  st.comm_bytes_intra_node = after.intra - before.intra;
  st.comm_bytes_inter_node = after.inter - before.inter;
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

}  // namespace shardft
