#pragma once
// One optimizer step over this rank's micro-batches: gradient accumulation with the loss normalised
// by the target tokens of the whole global step (all ranks, all micro-batches), then the sharding
// engine's reduction, global-norm clipping and AdamW update.
#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "config/train_config.hpp"
#include "data/sft_data.hpp"
#include "kernels/device_traffic.hpp"
#include "kernels/gemm_counters.hpp"
#include "model/decoder.hpp"
#include "parallel/estimate/memory_preflight.hpp"
#include "parallel/parallel_plan.hpp"
#include "parallel/zero_engine.hpp"
#include "infer/attention_choice.hpp"
#include "train/loss_scaler.hpp"
#include "train/lr_schedule.hpp"

namespace shardft {

struct StepStats {
  double loss = 0.0;            // mean CE over the global step's target tokens
  double grad_norm = 0.0;       // before clipping
  double learning_rate = 0.0;   // the rate this step used
  std::int64_t tokens = 0;      // non-padding tokens processed, all ranks
  std::int64_t targets = 0;     // target tokens, all ranks
  double seconds = 0.0;
  double comm_bytes = 0.0;      // bytes this rank sent during the step, all groups
  double comm_bytes_intra_node = 0.0, comm_bytes_inter_node = 0.0;
  // fp16: the loss scale this step used, and whether its gradient overflowed (inf or NaN on some rank),
  // so its update was skipped on every rank (train/loss_scaler.hpp)
  double loss_scale = 1.0;
  bool skipped = false;
};

// What one step ran on the device, from its first upload through its read-back (DESIGN's "A device step
// allocates nothing ..."): its GEMMs by path, its kernel launches, and its host<->device traffic.
struct StepKernels {
  GemmCounters gemm;
  std::int64_t launches = 0;        // the whole step
  std::int64_t layer_launches = 0;  // of those, inside the decoder layers (Decoder::layer_launches)
  int micro_batches = 1;
  DeviceTraffic traffic;  // the whole step, read-back included
};

class Trainer {
 public:
  // total_steps sizes the LR schedule. The plan's world normalises the loss over every rank; its shard,
  // replica and ZeRO++ groups are the engine's. dp_group alone: one group for all (ParallelPlan::over).
  Trainer(const TrainConfig& cfg, long total_steps, const ParallelPlan& plan);
  Trainer(const TrainConfig& cfg, long total_steps, Communicator& dp_group);

  StepStats step(const std::vector<TokenBatch>& micro_batches);

  Decoder& model() { return model_; }
  ZeroEngine& engine() { return engine_; }
  const LrSchedule& schedule() const { return schedule_; }
  const ParallelPlan& plan() const { return plan_; }
  long steps_done() const { return engine_.steps_taken(); }
  // What the last step's hot path moved between host and device (kernels/device_traffic.hpp): from its
  // first upload to its weight refresh, before the one read-back of its loss, gradient norm and the
  // count of non-finite values ZeRO++ quantized (an error when not 0). After
  // the first step: no copies, syncs or allocations; the inputs' uploads only.
  const DeviceTraffic& last_step_traffic() const { return last_step_traffic_; }
  // The last step's GEMMs, launches and whole traffic (StepKernels).
  const StepKernels& last_step_kernels() const { return last_step_kernels_; }
  // Tensors of model_name_or_path's weights left out on purpose, each with why (infer/pretrained.hpp).
  const std::vector<std::string>& ignored_weights() const { return ignored_weights_; }
  // Collective: the name of the first parameter (layout order, over every rank's shard) whose master
  // weights hold a NaN or Inf, or "" when none do. After a step whose loss or gradient norm was not
  // finite, that is the first parameter the bad gradient reached (the update carried it into the
  // weights) or whose weights were bad already.
  std::string first_nonfinite_parameter();
  // fp16's loss scale and its counters (disabled otherwise); a checkpoint saves and restores them.
  LossScaler& loss_scaler() { return loss_scaler_; }
  // Test hook: this rank's gradient of the next step becomes inf/NaN after the reduction (an injected
  // fp16 overflow on one rank only); the step clears it.
  void poison_next_gradient() { poison_next_gradient_ = true; }
  // What the memory preflight estimated for this rank before allocating (parallel/estimate/memory_preflight.hpp).
  const RankMemoryEstimate& memory_estimate() const { return memory_estimate_; }
  const RankMemoryBudget& memory_budget() const { return memory_budget_; }
  // The attention kernel this run uses and why (infer/attention_choice.hpp).
  const AttentionChoice& attention() const { return attention_; }

 private:
  struct LedgerTotals {
    double total = 0, intra = 0, inter = 0;
  };
  LedgerTotals ledger_totals() const;
  // The step's targets and real tokens over every rank (a host collective), into st.
  void count_targets(const std::vector<TokenBatch>& micro_batches, StepStats& st);
  // Forward and backward of each micro-batch, its loss divided by the step's target count and scaled
  // by fp16's loss scale; the loss summed into loss_sum on the device.
  void accumulate_micro_batches(const std::vector<TokenBatch>& micro_batches, const StepStats& st,
                                const Unmanaged1<double>& loss_sum);
  // fp16 overflow at the minimum loss scale: the error naming the first parameter (over every rank)
  // whose gradient is not finite.
  [[noreturn]] void throw_fp16_exhausted(double loss_scale);

  TrainConfig cfg_;
  ParallelPlan plan_;
  RankMemoryBudget memory_budget_;
  Communicator& group_;  // the plan's world
  Decoder model_;
  std::vector<std::string> ignored_weights_;  // checked before engine_ allocates the model's state
  RankMemoryEstimate memory_estimate_;        // checked against the rank's budget before engine_ too
  ZeroEngine engine_;
  LrSchedule schedule_;
  InputBuffers inputs_;
  // On the device: the step's loss sum, its squared gradient norm, and the non-finite values ZeRO++
  // quantization met (set_nonfinite_counter), read back together once per step.
  View1<double> step_sums_{"step_sums", 3};
  LossScaler loss_scaler_;
  bool poison_next_gradient_ = false;
  DeviceTraffic last_step_traffic_;
  StepKernels last_step_kernels_;
  AttentionChoice attention_;
};

// The batch on the device, its ids and targets checked against vocab_size on the host first (see
// upload_inputs); without vocab_size the decoder checks the ids itself through a copy back to the host.
ModelInputs to_model_inputs(const TokenBatch& b, int vocab_size);
ModelInputs to_model_inputs(const TokenBatch& b, int vocab_size, InputBuffers& buffers);
ModelInputs to_model_inputs(const TokenBatch& b);

}  // namespace shardft
