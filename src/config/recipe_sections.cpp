#include "config/recipe_sections.hpp"

#include <cmath>

#include "config/data_keys.hpp"
#include "config/lr_scheduler_kwargs.hpp"
#include "config/memory_size.hpp"
#include "config/zero_buckets.hpp"

namespace shardft {

ParallelConfig parallel_config(const TrainConfig& cfg) {
  return {cfg.shard_group_size, cfg.sharding_strategy, cfg.zero_hpz_partition_size, cfg.zero_quantized_gradients,
          cfg.ranks_per_node, cfg.collectives, cfg.collective_timeout_s};
}

DatasetOptions dataset_options(const TrainConfig& cfg) {
  DatasetOptions opt;
  opt.text_field = cfg.dataset_text_field;
  opt.role_map = role_map_of(cfg);
  opt.skip_bad_samples = cfg.skip_bad_samples;
  return opt;
}

TrainingSetConfig training_set_config(const TrainConfig& cfg) {
  TrainingSetConfig c;
  c.datasets = training_datasets(cfg);
  c.options = dataset_options(cfg);
  c.role_map = cfg.role_map;
  c.seed = data_order_seed(cfg);
  c.max_seq_length = cfg.max_seq_length;
  c.packing = cfg.packing;
  c.packing_strategy = cfg.packing_strategy;
  c.val_set_size = cfg.val_set_size;
  c.loss = {cfg.assistant_only_loss, cfg.completion_only_loss};
  c.cache_dir = cfg.dataset_cache_dir;
  return c;
}

SamplerConfig sampler_section(const TrainConfig& cfg) {
  SamplerConfig s;
  s.per_device_train_batch_size = cfg.per_device_train_batch_size;
  s.gradient_accumulation_steps = cfg.gradient_accumulation_steps;
  s.train_batch_size = cfg.train_batch_size;
  s.max_steps = cfg.max_steps;
  s.num_train_epochs = cfg.num_train_epochs;
  s.packing = cfg.packing;
  s.order_seed = data_order_seed(cfg);
  // The one file, or the mixture.
  s.data_name = cfg.datasets.empty() ? cfg.dataset_path : "datasets " + cfg.datasets;
  return s;
}

EvalConfig eval_config(const TrainConfig& cfg) {
  EvalConfig e;
  e.eval_dataset_path = cfg.eval_dataset_path;
  e.eval_samples = cfg.eval_samples;
  e.val_set_size = cfg.val_set_size;
  e.eval_strategy = cfg.eval_strategy;
  e.eval_interval_steps = eval_interval_steps(cfg);
  e.evaluates_during_training = evaluates_during_training(cfg);
  e.judges_best_model = judges_best_model(cfg);
  e.eval_generate = cfg.eval_generate;
  e.eval_max_new_tokens = cfg.eval_max_new_tokens;
  e.per_device_eval_batch_size = cfg.per_device_eval_batch_size;
  e.max_seq_length = cfg.max_seq_length;
  e.options = dataset_options(cfg);
  e.loss = {cfg.assistant_only_loss, cfg.completion_only_loss};
  e.best_model.metric = best_model_metric(cfg);
  e.best_model.greater_is_better = best_metric_greater_is_better(cfg);
  e.best_model.patience = cfg.early_stopping_patience;
  e.best_model.threshold = cfg.early_stopping_threshold;
  return e;
}

ComputeDtype compute_dtype(const TrainConfig& cfg) { return compute_dtype_of(cfg.bf16, cfg.fp16); }

ZeroConfig zero_config(const TrainConfig& cfg, bool separate_queues) {
  ZeroConfig z;
  z.stage = cfg.zero_stage;
  z.dtype = compute_dtype(cfg);
  z.adam_beta1 = cfg.adam_beta1;
  z.adam_beta2 = cfg.adam_beta2;
  z.adam_epsilon = cfg.adam_epsilon;
  z.weight_decay = cfg.weight_decay;
  z.bf16_gradients = cfg.communication_data_type == "bf16";
  z.quantized_weights = cfg.zero_quantized_weights;
  z.quantized_gradients = cfg.zero_quantized_gradients;
  z.hpz_partition_size = cfg.zero_hpz_partition_size;
  z.quantization_block = cfg.zero_quantization_block_size;
  // Gradient buckets: "auto" is hidden_size^2, smaller than a layer block, so every unit (embedding,
  // layer, head) is a bucket of its own: a reduction starts as soon as a layer's backward ends and no
  // gradient waits for others to fill its bucket (DeepSpeed's 5e8 would be one bucket sent after the
  // whole backward, overlapping nothing, holding the full gradient).
  z.reduce_bucket_elements = resolved_reduce_bucket_size(cfg);
  z.overlap_comm = cfg.overlap_comm;
  z.overlap_optimizer = optimizer_overlaps(cfg, separate_queues);
  z.overlap_gemm_sm_reserve = cfg.optimizer_overlap_sms;
  z.allgather_bucket_elements = resolved_allgather_bucket_size(cfg);
  // Stage 3 prefetches the next block; an explicit allgather_bucket_size lets it gather further ahead.
  // Not "auto" (5e8: every weight of any model below 500M parameters), which would hold the whole
  // model gathered and undo stage 3's memory saving.
  z.prefetch_elements = cfg.allgather_bucket_size == "auto" ? 0 : resolved_allgather_bucket_size(cfg);
  return z;
}

ActivationShape activation_shape(const TrainConfig& cfg) {
  ActivationShape a;
  a.batch = cfg.per_device_train_batch_size;
  a.seq = cfg.max_seq_length;
  a.checkpointing = cfg.gradient_checkpointing;
  a.eager_attention = cfg.attn_implementation == "eager";
  a.bf16 = cfg.bf16;
  a.logits_chunk_tokens = cfg.logits_chunk_tokens;
  a.fused_attention_allowed = cfg.attn_implementation != "eager" && cfg.attn_implementation != "memory_efficient";
  return a;
}

LossScalerConfig loss_scaler_config(const TrainConfig& cfg) {
  LossScalerConfig c;
  c.dynamic = cfg.loss_scale == 0;
  c.initial_scale = c.dynamic ? std::ldexp(1.0, cfg.initial_scale_power) : cfg.loss_scale;
  c.window = cfg.loss_scale_window;
  c.hysteresis = cfg.hysteresis;
  c.consecutive_hysteresis = cfg.consecutive_hysteresis;
  c.min_scale = cfg.min_loss_scale;
  return c;
}

CheckpointConfig checkpoint_config(const TrainConfig& cfg) {
  CheckpointConfig c;
  c.output_dir = cfg.output_dir;
  c.schedule = {cfg.save_strategy, cfg.save_steps};
  c.save_total_limit = cfg.save_total_limit;
  c.model_name_or_path = cfg.model_name_or_path;
  c.tokenizer_name_or_path = cfg.tokenizer_name_or_path;
  c.zero_stage = cfg.zero_stage;
  c.model = cfg.model;
  c.dtype = compute_dtype(cfg);
  c.recipe_yaml = to_yaml(cfg);
  return c;
}

ModelExportConfig model_export_config(const TrainConfig& cfg) {
  ModelExportConfig c;
  c.output_dir = cfg.output_dir;
  c.model_name_or_path = cfg.model_name_or_path;
  c.export_dtype = cfg.export_dtype;
  c.max_shard_bytes = static_cast<std::uint64_t>(parse_memory_size(cfg.max_shard_size));
  return c;
}

LrScheduleConfig lr_schedule_config(const TrainConfig& cfg, long total_steps) {
  LrScheduleConfig s;
  s.type = cfg.lr_scheduler_type;
  s.peak_lr = cfg.learning_rate;
  s.total_steps = total_steps;
  s.warmup_steps = resolve_warmup_steps(cfg.warmup_steps, cfg.warmup_ratio, total_steps);
  const LrSchedulerKwargs kw = parse_lr_scheduler_kwargs_text(cfg.lr_scheduler_kwargs);
  const double min_lr = kw.min_lr ? *kw.min_lr : cfg.min_lr;
  s.min_lr_rate = min_lr > 0 ? min_lr / cfg.learning_rate : kw.min_lr_rate ? *kw.min_lr_rate : cfg.min_lr_rate;
  s.num_cycles = kw.num_cycles ? *kw.num_cycles : s.type == "cosine_with_restarts" ? 1.0 : 0.5;
  if (s.type == "warmup_stable_decay") {
    s.decay_steps = kw.num_decay_steps.value_or(0);
    s.stable_steps = kw.num_stable_steps ? *kw.num_stable_steps : total_steps - s.warmup_steps - s.decay_steps;
    s.min_lr_ratio = kw.min_lr_ratio.value_or(0.0);
    if (!kw.warmup_type.empty()) s.wsd_warmup = kw.warmup_type;
    if (!kw.decay_type.empty()) s.wsd_decay = kw.decay_type;
    if (s.stable_steps < 0) {
      throw ConfigError("lr_scheduler_type warmup_stable_decay: warm-up (" + std::to_string(s.warmup_steps) +
                        " steps) and num_decay_steps (" + std::to_string(s.decay_steps) + ") exceed the run's " +
                        std::to_string(total_steps) + " steps");
    }
  }
  s.warmup_type = cfg.warmup_type;
  s.warmup_min_lr = cfg.warmup_min_lr;
  s.warmup_min_ratio = cfg.warmup_min_ratio;
  s.cos_min_ratio = cfg.cos_min_ratio;
  return s;
}

long resolve_warmup_steps(long warmup_steps, double warmup_ratio, long total_steps) {
  if (warmup_steps > 0) return warmup_steps;
  return static_cast<long>(std::ceil(warmup_ratio * static_cast<double>(total_steps)));
}

}  // namespace shardft
