#pragma once
// One optimizer step over a list of micro-batches: gradient accumulation with the loss normalised
// by the target tokens of the whole step, global-norm clipping, AdamW on fp32 master weights, and
// the refresh of the compute-precision weights the model reads.
#include <cstdint>
#include <vector>

#include "config/train_config.hpp"
#include "data/sft_data.hpp"
#include "model/decoder.hpp"
#include "train/lr_schedule.hpp"
#include "train/optimizer.hpp"

namespace shardft {

struct StepStats {
  double loss = 0.0;            // mean CE over the step's target tokens
  double grad_norm = 0.0;       // before clipping
  double learning_rate = 0.0;   // the rate this step used
  std::int64_t tokens = 0;      // non-padding tokens processed
  std::int64_t targets = 0;
  double seconds = 0.0;
};

class Trainer {
 public:
  // total_steps sizes the LR schedule.
  Trainer(const TrainConfig& cfg, long total_steps);

  StepStats step(const std::vector<TokenBatch>& micro_batches);

  Decoder& model() { return model_; }
  LocalParams& params() { return params_; }      // compute-precision weights and gradients
  View1<float> master() const { return master_; }
  const LrSchedule& schedule() const { return schedule_; }
  long steps_done() const { return optimizer_.steps_taken(); }

  // Copies master into the weights the model reads (rounded to bf16 when computing in bf16).
  void refresh_compute_weights();

 private:
  TrainConfig cfg_;
  Decoder model_;
  LocalParams params_;
  View1<float> master_;
  AdamW optimizer_;
  LrSchedule schedule_;
};

ModelInputs to_model_inputs(const TokenBatch& b);

}  // namespace shardft
