#include "data/sampler.hpp"

#include <cmath>
#include <string>

namespace shardft {

StepPlan plan_steps(const SamplerConfig& cfg, long num_samples, int dp_ranks) {
  if (cfg.train_batch_size > 0) {
    const long got = static_cast<long>(cfg.per_device_train_batch_size) * cfg.gradient_accumulation_steps * dp_ranks;
    if (got != cfg.train_batch_size) {
      throw ConfigError("train_batch_size " + std::to_string(cfg.train_batch_size) + " != per_device_train_batch_size " +
                        std::to_string(cfg.per_device_train_batch_size) + " x gradient_accumulation_steps " +
                        std::to_string(cfg.gradient_accumulation_steps) + " x " + std::to_string(dp_ranks) +
                        " ranks = " + std::to_string(got));
    }
  }
  StepPlan p;
  p.samples_per_step = static_cast<long>(cfg.per_device_train_batch_size) * cfg.gradient_accumulation_steps * dp_ranks;
  if (num_samples < p.samples_per_step) {
    throw ConfigError(cfg.data_name + ": " + std::to_string(num_samples) +
                      " samples, fewer than one optimizer step needs (global batch = per_device_train_batch_size " +
                      std::to_string(cfg.per_device_train_batch_size) + " x gradient_accumulation_steps " +
                      std::to_string(cfg.gradient_accumulation_steps) + " x " + std::to_string(dp_ranks) +
                      " ranks = " + std::to_string(p.samples_per_step) + ")");
  }
  p.steps_per_epoch = num_samples / p.samples_per_step;
  p.total_steps = cfg.max_steps > 0 ? cfg.max_steps
                                    : static_cast<long>(std::ceil(cfg.num_train_epochs * static_cast<double>(p.steps_per_epoch)));
  return p;
}

double epoch_at(long step, const StepPlan& plan) {
  return static_cast<double>(step) / static_cast<double>(plan.steps_per_epoch);
}

std::vector<std::int64_t> micro_batch_indices(const SamplerConfig& cfg, const StepPlan& plan,
                                              const std::vector<std::int64_t>& epoch_order, long step, int micro,
                                              int rank, int dp_ranks) {
  const long B = cfg.per_device_train_batch_size;
  const long first = (step % plan.steps_per_epoch) * plan.samples_per_step + (static_cast<long>(micro) * dp_ranks + rank) * B;
  return std::vector<std::int64_t>(epoch_order.begin() + first, epoch_order.begin() + first + B);
}

}  // namespace shardft
