#pragma once
// The recipe's sections, built here and only here. Each part takes its own small struct, never the whole
// TrainConfig: the parallel plan, the data pipeline and its sampler, evaluation, the engine, the memory
// preflight, the loss scaler and the learning-rate schedule. What the recipe implies (the data order's
// seed, the mixture, bucket sizes, the optimizer overlap, the compute dtype, the schedule's kwargs, the
// best-model rule) is resolved once, in this one file.
#include "config/train_config.hpp"
#include "data/datasets.hpp"
#include "data/sampler.hpp"
#include "data/training_set.hpp"
#include "model/linear.hpp"
#include "parallel/estimate/memory_preflight.hpp"
#include "parallel/parallel_plan.hpp"
#include "parallel/zero/zero_config.hpp"
#include "train/loss_scaler.hpp"
#include "train/lr_schedule.hpp"
#include "train/training_eval.hpp"

namespace shardft {

ParallelConfig parallel_config(const TrainConfig& cfg);

// How dataset files are read (dataset_text_field, role_map, skip_bad_samples): training and eval alike.
DatasetOptions dataset_options(const TrainConfig& cfg);
TrainingSetConfig training_set_config(const TrainConfig& cfg);
SamplerConfig sampler_section(const TrainConfig& cfg);
EvalConfig eval_config(const TrainConfig& cfg);

ComputeDtype compute_dtype(const TrainConfig& cfg);  // bf16, fp16 or fp32 as the recipe says
ZeroConfig zero_config(const TrainConfig& cfg);
// What the memory preflight assumes of the activations, as the run will choose its kernels.
ActivationShape activation_shape(const TrainConfig& cfg);

LossScalerConfig loss_scaler_config(const TrainConfig& cfg);
// The run's schedule from the recipe's keys (and lr_scheduler_kwargs), for a run of total_steps optimizer
// steps. ConfigError where warmup_stable_decay's warm-up and decay do not fit in the run.
LrSchedule make_lr_schedule(const TrainConfig& cfg, long total_steps);

}  // namespace shardft
