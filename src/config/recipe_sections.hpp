#pragma once
// The recipe's sections, built here and only here (the structs: config/*_section(s).hpp). Each part
// takes its own small struct, never the whole TrainConfig: the parallel plan, the data pipeline and its sampler, evaluation, the engine, the memory
// preflight, the loss scaler and the learning-rate schedule. What the recipe implies (the data order's
// seed, the mixture, bucket sizes, the optimizer overlap, the compute dtype, the schedule's kwargs, the
// best-model rule) is resolved once, in this one file.
#include "config/checkpoint_section.hpp"
#include "config/compute_dtype.hpp"
#include "config/data_sections.hpp"
#include "config/engine_sections.hpp"
#include "config/eval_section.hpp"
#include "config/parallel_section.hpp"
#include "config/train_config.hpp"

namespace shardft {

ParallelConfig parallel_config(const TrainConfig& cfg);

// How dataset files are read (dataset_text_field, role_map, skip_bad_samples): training and eval alike.
DatasetOptions dataset_options(const TrainConfig& cfg);
TrainingSetConfig training_set_config(const TrainConfig& cfg);
SamplerConfig sampler_section(const TrainConfig& cfg);
EvalConfig eval_config(const TrainConfig& cfg);

ComputeDtype compute_dtype(const TrainConfig& cfg);  // bf16, fp16 or fp32 as the recipe says
// separate_queues: the build runs a second device queue (kernels/side_queue.hpp), which optimizer_overlap
// auto uses.
ZeroConfig zero_config(const TrainConfig& cfg, bool separate_queues);
// What the memory preflight assumes of the activations, as the run will choose its kernels.
ActivationShape activation_shape(const TrainConfig& cfg);

LossScalerConfig loss_scaler_config(const TrainConfig& cfg);
CheckpointConfig checkpoint_config(const TrainConfig& cfg);
ModelExportConfig model_export_config(const TrainConfig& cfg);
// The run's schedule from the recipe's keys (and lr_scheduler_kwargs), for a run of total_steps optimizer
// steps. ConfigError where warmup_stable_decay's warm-up and decay do not fit in the run.
LrScheduleConfig lr_schedule_config(const TrainConfig& cfg, long total_steps);
// Warm-up steps from warmup_steps, or from warmup_ratio of the run when warmup_steps is 0 (HF: ceil).
long resolve_warmup_steps(long warmup_steps, double warmup_ratio, long total_steps);

}  // namespace shardft
