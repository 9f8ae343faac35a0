// The table of recipe keys and the text <-> value conversions every key shares.
#include "config/recipe_schema.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <type_traits>

#include "config/data_keys.hpp"
#include "config/lora_config.hpp"
#include "config/lr_scheduler_kwargs.hpp"
#include "config/memory_size.hpp"
#include "config/zero_buckets.hpp"

namespace shardft {

// ---- ranges -------------------------------------------------------------------------------

bool ValueRange::contains(double value) const {
  if (allows_minus_one && value == -1.0) return true;
  // Written so that NaN fails every comparison and is rejected.
  const bool above_min = min_inclusive ? value >= min : value > min;
  const bool below_max = max_inclusive ? value <= max : value < max;
  return above_min && below_max;
}

bool ValueRange::is_unbounded() const {
  return !allows_minus_one && std::isinf(min) && std::isinf(max);
}

namespace {
std::string bound_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// chat_template: a template's name, or the path of a template file (data/chat_template.hpp reads it
// and reports a missing or unreadable file).
std::string checked_chat_template(const std::string& value) {
  for (const char* name : {"auto", "shardft", "chatml", "llama3", "plain"}) {
    if (value == name) return value;
  }
  auto ends_with = [&](const std::string& suffix) {
    return value.size() > suffix.size() && value.compare(value.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".jinja") || ends_with(".json")) return value;
  throw std::invalid_argument("must be auto, shardft, chatml, llama3, plain, or the path of a .jinja file or a "
                              "tokenizer_config.json, got '" + value + "'");
}
// An optional flag (greater_is_better): "" (unset, derived), "true" or "false", however YAML spells them.
std::string canonical_optional_bool_text(const std::string& value) {
  if (value.empty()) return value;
  std::string lower;
  for (char c : value) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "true" || lower == "yes" || lower == "on" || lower == "1") return "true";
  if (lower == "false" || lower == "no" || lower == "off" || lower == "0") return "false";
  throw std::invalid_argument("must be true, false or empty, got '" + value + "'");
}
}  // namespace

std::string ValueRange::describe() const {
  std::string text = allows_minus_one ? "-1 or " : "";
  const bool has_min = !std::isinf(min);
  const bool has_max = !std::isinf(max);
  if (has_min && has_max) {
    text += std::string("in ") + (min_inclusive ? "[" : "(") + bound_text(min) + ", " + bound_text(max) +
            (max_inclusive ? "]" : ")");
  } else if (has_min) {
    text += (min_inclusive ? ">= " : "> ") + bound_text(min);
  } else if (has_max) {
    text += (max_inclusive ? "<= " : "< ") + bound_text(max);
  }
  return text;
}

ValueRange at_least(double min) { return ValueRange{min, true, HUGE_VAL, true, false}; }
ValueRange greater_than(double min) { return ValueRange{min, false, HUGE_VAL, true, false}; }
ValueRange closed_interval(double min, double max) { return ValueRange{min, true, max, true, false}; }
ValueRange half_open_interval(double min, double max) { return ValueRange{min, true, max, false, false}; }
ValueRange minus_one_or_at_least(double min) { return ValueRange{min, true, HUGE_VAL, true, true}; }

RecipeKey RecipeKey::in(ValueRange r) const { RecipeKey k = *this; k.range = r; return k; }
RecipeKey RecipeKey::one_of(std::vector<std::string> allowed) const {
  RecipeKey k = *this; k.choices = std::move(allowed); return k;
}
RecipeKey RecipeKey::non_empty() const { RecipeKey k = *this; k.must_be_non_empty = true; return k; }
RecipeKey RecipeKey::also_named(std::string alias) const {
  RecipeKey k = *this; k.aliases.push_back(std::move(alias)); return k;
}
RecipeKey RecipeKey::structured(std::function<std::string(const std::string&)> canonical) const {
  RecipeKey k = *this; k.normalize = std::move(canonical); return k;
}
RecipeKey RecipeKey::or_auto(bool TrainConfig::*flag) const { RecipeKey k = *this; k.auto_flag = flag; return k; }

// ---- the table ----------------------------------------------------------------------------

namespace {


template <typename T>
RecipeKey train_key(std::string name, T TrainConfig::*member, std::string doc) {
  RecipeKey k;
  k.name = std::move(name);
  k.field = [member](TrainConfig& cfg) -> ConfigField { return &(cfg.*member); };
  k.doc = std::move(doc);
  return k;
}

template <typename T>
RecipeKey model_key(std::string name, T ModelConfig::*member, std::string doc) {
  RecipeKey k;
  k.name = std::move(name);
  k.is_model_key = true;
  k.field = [member](TrainConfig& cfg) -> ConfigField { return &(cfg.model.*member); };
  k.doc = std::move(doc);
  return k;
}

std::vector<RecipeKey> build_recipe_keys() {
  using T = TrainConfig;
  using M = ModelConfig;
  return {
      train_key("model_name_or_path", &T::model_name_or_path,
                "local HF model directory (config.json, model.safetensors or an index) to fine-tune; "
                "empty: a new model of the shape the model keys give"),
      // data
      train_key("dataset_path", &T::dataset_path, "training conversations, JSONL").non_empty(),
      train_key("eval_dataset_path", &T::eval_dataset_path, "evaluation conversations, JSONL (needed when do_eval)"),
      train_key("max_seq_length", &T::max_seq_length, "tokens per packed sequence")
          .in(at_least(2)).also_named("max_length"),  // trl >= 0.16 calls it max_length
      train_key("datasets", &T::datasets,
                "training files mixed by weight, instead of dataset_path: [{path: a.jsonl, weight: 2.0}, ...]")
          .structured(canonical_datasets_text),
      train_key("dataset_text_field", &T::dataset_text_field, "the field of plain-text records (trl's name)")
          .non_empty(),
      train_key("role_map", &T::role_map,
                "dataset roles beyond human/gpt/system/user/assistant: {bot: assistant, ...}")
          .structured(canonical_role_map_text),
      train_key("assistant_only_loss", &T::assistant_only_loss,
                "conversations: the loss on the assistant's turns only (trl's key; trl defaults to false, the "
                "whole conversation); false: on every token"),
      train_key("completion_only_loss", &T::completion_only_loss,
                "prompt / completion records: the loss on the completion only (trl's default); false: on every token"),
      train_key("skip_bad_samples", &T::skip_bad_samples,
                "skip malformed records (counted, first reasons logged) instead of stopping"),
      train_key("tokenizer_name_or_path", &T::tokenizer_name_or_path,
                "byte (built in), an HF tokenizer.json, or a directory holding one").non_empty(),
      train_key("chat_template", &T::chat_template,
                "how conversations become tokens: auto (the model's own Jinja template from the tokenizer's "
                "tokenizer_config.json, else shardft), shardft, chatml, llama3, plain, or a .jinja / "
                "tokenizer_config.json file")
          .structured(checked_chat_template),
      train_key("dataset_cache_dir", &T::dataset_cache_dir,
                "where tokenized (and packed) training sets are stored, keyed by the data's content, the tokenizer, "
                "the template and the length; empty: no cache"),
      // optimisation
      train_key("packing", &T::packing, "pack samples into rows of max_seq_length (first-fit decreasing)"),
      train_key("packing_strategy", &T::packing_strategy,
                "how packing fills rows: ffd (first-fit decreasing) or bfd (best-fit decreasing, trl's default); "
                "trl's wrapped (rows cut across samples) is not offered: a sample stays whole in its row"),
      train_key("learning_rate", &T::learning_rate,
                "peak learning rate; unset while fine-tuning model_name_or_path: 2e-5 (trl's default)")
          .in(greater_than(0)),
      train_key("lr_scheduler_type", &T::lr_scheduler_type,
                "learning-rate schedule after warmup: HF's (constant and constant_with_warmup both warm up first), "
                "or DeepSpeed's WarmupLR, WarmupDecayLR, WarmupCosineLR as its engine steps them")
          .one_of({"constant", "constant_with_warmup", "linear", "cosine", "cosine_with_min_lr", "cosine_with_restarts",
                   "warmup_stable_decay", "ds_warmup",
                   "ds_warmup_decay", "ds_warmup_cosine"}),
      train_key("warmup_steps", &T::warmup_steps, "warmup steps; 0: use warmup_ratio").in(at_least(0)),
      train_key("warmup_ratio", &T::warmup_ratio, "warmup as a fraction of all steps").in(closed_interval(0, 1)),
      train_key("min_lr", &T::min_lr, "cosine_with_min_lr: absolute floor").in(at_least(0)),
      train_key("min_lr_rate", &T::min_lr_rate, "cosine_with_min_lr: floor as a fraction of learning_rate")
          .in(closed_interval(0, 1)),
      train_key("lr_scheduler_kwargs", &T::lr_scheduler_kwargs,
                "the schedule's own settings (HF's key): {num_cycles: N} for cosine and cosine_with_restarts; "
                "{num_decay_steps: N, num_stable_steps, min_lr_ratio, warmup_type, decay_type} for "
                "warmup_stable_decay; {min_lr or min_lr_rate} for cosine_with_min_lr")
          .structured(canonical_lr_scheduler_kwargs_text),
      train_key("warmup_type", &T::warmup_type, "ds_* schedules: DeepSpeed's warmup shape").one_of({"log", "linear"}),
      train_key("warmup_min_lr", &T::warmup_min_lr, "ds_warmup, ds_warmup_decay: warmup start (and decay end)")
          .in(at_least(0)),
      train_key("warmup_min_ratio", &T::warmup_min_ratio, "ds_warmup_cosine: warmup start, a fraction of learning_rate")
          .in(closed_interval(0, 1)),
      train_key("cos_min_ratio", &T::cos_min_ratio, "ds_warmup_cosine: end, a fraction of learning_rate")
          .in(closed_interval(0, 1)),
      train_key("weight_decay", &T::weight_decay, "AdamW decoupled weight decay").in(at_least(0)),
      train_key("max_grad_norm", &T::max_grad_norm, "clip the global gradient norm to this; <= 0: no clipping"),
      train_key("adam_beta1", &T::adam_beta1, "AdamW first-moment decay").in(half_open_interval(0, 1)),
      train_key("adam_beta2", &T::adam_beta2, "AdamW second-moment decay").in(half_open_interval(0, 1)),
      train_key("optim", &T::optim,
                "the optimizer by HF's name: adamw_torch, adamw_torch_fused, adamw_apex_fused or adamw_hf, all the same "
                "AdamW (fp32 moments, decoupled weight decay; the update is one fused kernel)")
          .non_empty(),
      train_key("adam_epsilon", &T::adam_epsilon, "AdamW denominator epsilon").in(greater_than(0)),
      // batch and length of the run
      train_key("per_device_train_batch_size", &T::per_device_train_batch_size, "sequences per rank per micro-batch")
          .in(at_least(1)),
      train_key("train_batch_size", &T::train_batch_size,
                "global batch; 0: per_device_train_batch_size x gradient_accumulation_steps x ranks")
          .in(at_least(0)),
      train_key("per_device_eval_batch_size", &T::per_device_eval_batch_size, "sequences per rank per eval batch")
          .in(at_least(1)),
      train_key("gradient_accumulation_steps", &T::gradient_accumulation_steps, "micro-batches per optimizer step")
          .in(at_least(1)),
      train_key("num_train_epochs", &T::num_train_epochs, "passes over the data (when max_steps is -1)")
          .in(at_least(0)),
      train_key("max_steps", &T::max_steps, "optimizer steps; -1: run num_train_epochs")
          .in(minus_one_or_at_least(1)),
      // bookkeeping
      train_key("logging_steps", &T::logging_steps, "log every this many optimizer steps").in(at_least(1)),
      train_key("logging_first_step", &T::logging_first_step, "log the first optimizer step too"),
      train_key("report_to", &T::report_to,
                "where logged metrics go besides metrics.jsonl: tensorboard (event files in logging_dir; W&B "
                "imports them with `wandb sync --sync-tensorboard`), all (the same), none")
          .one_of({"none", "tensorboard", "all"}),
      train_key("logging_dir", &T::logging_dir,
                "TensorBoard's folder; empty: output_dir/runs/<run_name>, or output_dir/runs/<Mon>DD_HH-MM-SS_<host> "
                "(HF's default) without run_name"),
      train_key("run_name", &T::run_name, "the run's name: its TensorBoard folder under output_dir/runs"),
      train_key("disable_tqdm", &T::disable_tqdm,
                "no progress bar (rank 0 draws one on stderr, or stdout, where that is a terminal)"),
      train_key("log_level", &T::log_level,
                "passive or info: the run's report; debug: also diagnostics (each of the first two steps' host<->device "
                "traffic, vendor libraries linked but idle)")
          .one_of({"passive", "info", "debug"}),
      train_key("save_strategy", &T::save_strategy,
                "steps: every save_steps and at the end; epoch: at each epoch's end; best: at each evaluation "
                "that sets a new best metric_for_best_model; no: only when preempted")
          .one_of({"steps", "epoch", "best", "no"}),
      train_key("save_steps", &T::save_steps, "checkpoint every this many steps; 0: only at the end").in(at_least(0)),
      train_key("save_total_limit", &T::save_total_limit, "keep the newest N checkpoints; 0: all").in(at_least(0)),
      train_key("export_dtype", &T::export_dtype,
                "dtype of the final model's weight files: auto (model_name_or_path's torch_dtype, as transformers "
                "saves a model in the dtype it loaded; fp32 for a model defined here), fp32, bf16, fp16")
          .one_of({"auto", "fp32", "bf16", "fp16"}),
      train_key("max_shard_size", &T::max_shard_size,
                "save_pretrained's: past this size the final model is numbered shards plus "
                "model.safetensors.index.json (5GB, 500MB, 2GiB; a tensor larger than it gets a shard of its own)")
          .structured(canonical_shard_size_text),
      train_key("resume_from_checkpoint", &T::resume_from_checkpoint,
                "continue from a checkpoint directory, or true for the newest good one in output_dir"),
      train_key("output_dir", &T::output_dir, "where checkpoints and metrics go").non_empty(),
      train_key("overwrite_output_dir", &T::overwrite_output_dir,
                "a run that does not resume clears an earlier run's checkpoints and metrics in output_dir (else: exit 2)"),
      train_key("seed", &T::seed, "seed for initialisation and data order"),
      train_key("data_seed", &T::data_seed,
                "seed of the data order alone (epochs, the datasets mixture, the val_set_size split); -1: seed")
          .in(minus_one_or_at_least(0)),
      train_key("bf16", &T::bf16,
                "compute in bfloat16 (master weights stay fp32); auto: where the GPU has bf16 tensor cores "
                "(compute capability 8.0 on) or the CPU has AMX tiles, not on other CPUs (bf16 is emulated "
                "there) nor with fp16")
          .or_auto(&T::bf16_auto),
      train_key("fp16", &T::fp16, "compute in IEEE half with loss scaling (master weights stay fp32); not with bf16"),
      train_key("loss_scale", &T::loss_scale, "fp16: 0 scales the loss dynamically (DeepSpeed's rules); > 0: a static scale")
          .in(at_least(0)),
      train_key("initial_scale_power", &T::initial_scale_power, "fp16, dynamic scale: it starts at 2^this")
          .in(closed_interval(0, 64)),
      train_key("loss_scale_window", &T::loss_scale_window,
                "fp16, dynamic scale: it doubles after this many consecutive steps without overflow")
          .in(at_least(1)),
      train_key("hysteresis", &T::hysteresis, "fp16, dynamic scale: overflowing steps tolerated before it halves")
          .in(at_least(1)),
      train_key("consecutive_hysteresis", &T::consecutive_hysteresis,
                "fp16, dynamic scale: a step without overflow restores the full hysteresis"),
      train_key("min_loss_scale", &T::min_loss_scale,
                "fp16, dynamic scale: it never halves below this; an overflow there fails the run")
          .in(greater_than(0)),
      train_key("neftune_noise_alpha", &T::neftune_noise_alpha,
                "NEFTune: uniform noise of magnitude alpha / sqrt(sequence length x hidden_size) on the input "
                "embeddings in training (HF's; the paper uses 5); 0: off")
          .in(at_least(0)),
      train_key("gradient_checkpointing", &T::gradient_checkpointing,
                "keep only each layer's input in forward and recompute the layer in backward"),
      train_key("attn_implementation", &T::attn_implementation,
                "auto / sdpa / flash_attention_2: the fused bf16 flash kernels (cuDNN SDPA on a GPU) where built "
                "and bf16, else memory_efficient; memory_efficient: keep a log-sum-exp per query and recompute; "
                "eager: keep the [seq, seq] probabilities for backward")
          .one_of({"auto", "sdpa", "flash_attention_2", "memory_efficient", "eager"}),
      train_key("deterministic_attention", &T::deterministic_attention,
                "the fused kernels' backward reproducible bit for bit (cuDNN's ordered dq); false: cuDNN's faster "
                "backward that adds dq with fp32 atomics, as PyTorch's SDPA does by default (a GPU build; the "
                "other attention kernels are deterministic either way)"),
      train_key("peak_tflops", &T::peak_tflops,
                "peak TFLOP/s of one rank for the MFU in the logs (e.g. 989 for an H100's dense bf16); 0: a known "
                "GPU's datasheet peak, else the GEMM rate each run measures at start").in(at_least(0)),
      train_key("logits_chunk_tokens", &T::logits_chunk_tokens,
                "tokens per chunk of the fused LM head + cross-entropy; 0: all at once; auto: 256 on the host, "
                "on a GPU as many as 1/16 of its free memory holds in logits (at least 2048, at most a "
                "micro-batch's tokens)")
          .in(at_least(0))
          .or_auto(&T::logits_chunk_auto),
      // LoRA
      train_key("use_peft", &T::use_peft,
                "train LoRA adapters (PEFT's LoraConfig) on frozen base weights; the base comes from "
                "model_name_or_path"),
      train_key("peft_type", &T::peft_type, "lora: the same as use_peft: true; empty: use_peft decides")
          .one_of({"", "lora"}),
      train_key("lora_r", &T::lora_r, "LoRA rank r: A is [r, in], B is [out, r]").in(at_least(1)),
      train_key("lora_alpha", &T::lora_alpha, "LoRA scale numerator: s = lora_alpha / r (rsLoRA: / sqrt(r))")
          .in(greater_than(0)),
      train_key("lora_dropout", &T::lora_dropout, "dropout on the LoRA branch's input while training")
          .in(half_open_interval(0, 1)),
      train_key("lora_target_modules", &T::lora_target_modules,
                "linear layers given LoRA: all-linear, or a list of q_proj, k_proj, v_proj, o_proj, gate_proj, "
                "up_proj, down_proj; empty: q_proj and v_proj (PEFT's default for Llama-family models)")
          .structured(canonical_lora_targets_text),
      train_key("use_rslora", &T::use_rslora, "rank-stabilised LoRA: s = lora_alpha / sqrt(r)"),
      train_key("lora_bias", &T::lora_bias, "PEFT's bias: only none (no bias is trained)").one_of({"none"}),
      train_key("load_in_4bit", &T::load_in_4bit,
                "QLoRA: hold the frozen base's decoder linear weights (q/k/v/o/gate/up/down_proj) as NF4 4-bit "
                "blocks, dequantized per layer for the GEMMs; needs use_peft"),
      train_key("bnb_4bit_quant_type", &T::bnb_4bit_quant_type, "4-bit code book: only nf4").one_of({"nf4"}),
      train_key("bnb_4bit_use_double_quant", &T::bnb_4bit_use_double_quant,
                "quantize the NF4 absmax again (8-bit, block 256): only true"),
      train_key("bnb_4bit_compute_dtype", &T::bnb_4bit_compute_dtype,
                "dtype the NF4 weights are dequantized into: the run's compute dtype (bfloat16 with bf16, float32 "
                "without); empty: the run's")
          .one_of({"", "bfloat16", "bf16", "float32", "fp32"}),
      train_key("adapter_path", &T::adapter_path,
                "a PEFT adapter folder (adapter_config.json + adapter_model.safetensors) to start LoRA's A and B "
                "from"),
      // data parallelism
      train_key("zero_stage", &T::zero_stage, "ZeRO stage: 0 replicate, 1 shard optimizer, 2 + gradients, 3 + weights")
          .in(closed_interval(0, 3)),
      train_key("ranks_per_node", &T::ranks_per_node, "treat every N consecutive ranks as one node; 0: ask MPI")
          .in(at_least(0)),
      train_key("sharding_strategy", &T::sharding_strategy,
                "FSDP's name for the stage: FULL_SHARD, HYBRID_SHARD, SHARD_GRAD_OP, NO_SHARD; empty: zero_stage")
          .one_of({"", "FULL_SHARD", "HYBRID_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "_HYBRID_SHARD_ZERO2"}),
      train_key("communication_data_type", &T::communication_data_type,
                "precision of gradient reductions on the wire (weights travel in the compute dtype)")
          .one_of({"fp32", "bf16"}),
      train_key("reduce_bucket_size", &T::reduce_bucket_size,
                "DeepSpeed's zero_optimization.reduce_bucket_size: elements per gradient reduction bucket; auto: "
                "hidden_size^2 (as HF's Trainer fills it): each layer block is a bucket, reduce-scattered while "
                "backward goes on")
          .structured(canonical_bucket_size_text),
      train_key("allgather_bucket_size", &T::allgather_bucket_size,
                "DeepSpeed's zero_optimization.allgather_bucket_size: elements per gather bucket of updated weights; "
                "auto: 5e8 (DeepSpeed's default); at stage 3 an explicit size is the prefetch window (auto: the next "
                "block)")
          .structured(canonical_bucket_size_text),
      train_key("overlap_comm", &T::overlap_comm,
                "DeepSpeed's zero_optimization.overlap_comm: reduce-scatter gradient buckets while backward goes on; "
                "false: wait for each bucket's reduction when it starts"),
      train_key("optimizer_overlap", &T::optimizer_overlap,
                "stage 0: run the optimizer step block by block on a device stream of its own, overlapped with the "
                "next step's forward, which waits for each block's update only before it reads that block (a GPU "
                "build; on the CPU the step is the same); the results do not change. auto: on at stage 0 of a "
                "GPU build without LoRA")
          .one_of({"auto", "true", "false"}),
      train_key("optimizer_overlap_sms", &T::optimizer_overlap_sms,
                "with the optimizer step overlapped on a GPU: SMs the next forward's GEMMs leave to it while it "
                "runs (cuBLAS's SM count target), so that it runs beside them rather than only between kernels; "
                "0: the GEMMs take every SM. GEMMs sized for fewer SMs may pick other algorithms (other rounding)")
          .in(at_least(0)),
      train_key("zero_quantized_weights", &T::zero_quantized_weights, "ZeRO++ qwZ: stage-3 weight gathers as int8"),
      train_key("zero_quantized_gradients", &T::zero_quantized_gradients,
                "ZeRO++ qgZ: gradient reduce-scatter as int4, intra-node then across nodes (stages 2, 3)"),
      train_key("zero_hpz_partition_size", &T::zero_hpz_partition_size,
                "ZeRO++ hpZ: backward weight gathers within groups of this many ranks (a node); 1: off")
          .in(at_least(1)),
      train_key("zero_quantization_block_size", &T::zero_quantization_block_size,
                "elements per quantization block of qwZ / qgZ").in(at_least(1)),
      train_key("shard_group_size", &T::shard_group_size,
                "ranks that split one model copy (hybrid sharding); 0: all ranks, or a node for HYBRID_SHARD")
          .in(at_least(0)),
      train_key("collectives", &T::collectives,
                "backend of the collectives: auto (NCCL where compute memory is on a GPU, else MPI), mpi, nccl")
          .one_of({"auto", "mpi", "nccl"}),
      train_key("collective_timeout_s", &T::collective_timeout_s,
                "seconds a rank waits for one collective before the job is aborted with the rank, group and "
                "collective named (a stopped or dead rank never leaves the others waiting)")
          .in(greater_than(0)),
      train_key("max_memory_per_rank", &T::max_memory_per_rank,
                "memory one rank may use, checked against the run's estimate before the model's state is allocated: "
                "auto (free device memory on a GPU; on the CPU the smaller of MemAvailable and the cgroup limit, "
                "shared by the node's ranks), a size such as 16GB or 12GiB, or none (no check)")
          .structured(canonical_memory_size_text),
      // evaluation
      train_key("do_eval", &T::do_eval, "evaluate on eval_dataset_path at the end"),
      train_key("eval_max_new_tokens", &T::eval_max_new_tokens, "generation length in evaluation").in(at_least(1)),
      train_key("eval_samples", &T::eval_samples, "eval conversations to use; -1: all")
          .in(minus_one_or_at_least(1)),
      train_key("eval_strategy", &T::eval_strategy,
                "evaluate during training: no, steps (every eval_steps), epoch (at each epoch's end)")
          .one_of({"no", "steps", "epoch"})
          .also_named("evaluation_strategy"),  // HF's name before 4.46
      train_key("eval_steps", &T::eval_steps, "eval_strategy steps: evaluate every this many steps; 0: logging_steps")
          .in(at_least(0)),
      train_key("eval_on_start", &T::eval_on_start, "evaluate once before the first step (a sanity check; not a best)"),
      train_key("eval_generate", &T::eval_generate,
                "evaluations during training also generate and score exact match (slower); else the loss only"),
      train_key("val_set_size", &T::val_set_size,
                "hold out this fraction (< 1) or number (>= 1) of the training samples as the eval set, instead of "
                "eval_dataset_path; 0: none")
          .in(at_least(0)),
      train_key("metric_for_best_model", &T::metric_for_best_model,
                "what the best checkpoint is judged by: loss or exact_match (eval_ prefix allowed); empty: loss")
          .one_of({"", "loss", "eval_loss", "exact_match", "eval_exact_match"}),
      train_key("greater_is_better", &T::greater_is_better,
                "whether a higher metric_for_best_model is better; empty: false for a loss, true otherwise")
          .structured(canonical_optional_bool_text),
      train_key("load_best_model_at_end", &T::load_best_model_at_end,
                "the exported model is the best evaluated checkpoint's, not the last step's"),
      train_key("early_stopping_patience", &T::early_stopping_patience,
                "stop after this many evaluations in a row without improvement; 0: never")
          .in(at_least(0)),
      train_key("early_stopping_threshold", &T::early_stopping_threshold,
                "how much metric_for_best_model must improve on the best for an evaluation to count as better")
          .in(at_least(0)),
      // model shape, under HF config.json names
      model_key("vocab_size", &M::vocab_size, "tokenizer vocabulary size").in(at_least(1)),
      model_key("hidden_size", &M::hidden_size, "model width").in(at_least(1)),
      model_key("num_hidden_layers", &M::num_hidden_layers, "decoder layers").in(at_least(1)),
      model_key("num_attention_heads", &M::num_attention_heads, "query heads").in(at_least(1)),
      model_key("num_key_value_heads", &M::num_key_value_heads, "key/value heads (grouped-query attention)")
          .in(at_least(1)),
      model_key("head_dim", &M::explicit_head_dim,
                "width of one attention head: q_proj is [heads * head_dim, hidden]; 0: hidden_size / "
                "num_attention_heads").in(at_least(0)),
      model_key("intermediate_size", &M::intermediate_size, "SwiGLU hidden width").in(at_least(1)),
      model_key("rope_theta", &M::rope_theta, "RoPE base frequency").in(greater_than(0)),
      model_key("rms_norm_eps", &M::rms_norm_eps, "RMSNorm epsilon").in(greater_than(0)),
      model_key("tie_word_embeddings", &M::tie_word_embeddings, "LM head shares the embedding matrix"),
      model_key("qkv_bias", &M::qkv_bias, "q_proj/k_proj/v_proj carry biases (Qwen2; Llama attention_bias)"),
      model_key("o_bias", &M::o_bias, "o_proj carries a bias (Llama attention_bias, with qkv_bias)"),
      model_key("qk_norm", &M::qk_norm, "RMSNorm over each head of q and of k before RoPE (Qwen3's q_norm, k_norm)"),
      model_key("max_position_embeddings", &M::max_position_embeddings, "longest sequence the model supports")
          .in(at_least(1)),
      model_key("initializer_range", &M::initializer_range, "std of the normal initialisation").in(at_least(0)),
  };
}

std::string to_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Optimal-string-alignment distance: Levenshtein plus adjacent transpositions, the usual typos.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

// ---- text <-> value, one overload per value type ------------------------------------------

bool parse_text(const std::string& s, int* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE || v < INT_MIN || v > INT_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parse_text(const std::string& s, std::uint64_t* out) {
  // strtoull accepts "-1" and wraps it around; a seed is never negative.
  if (s.empty() || s.find('-') != std::string::npos) return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) return false;
  *out = static_cast<std::uint64_t>(v);
  return true;
}

bool parse_text(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  // Rejects "inf", "nan" and overflow: no recipe value is meant to be infinite. Underflow
  // (ERANGE with a tiny result) is a real, if odd, value and is kept.
  if (*end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool parse_text(const std::string& s, bool* out) {
  const std::string t = to_lower(s);
  if (t == "true" || t == "yes" || t == "on" || t == "1") { *out = true; return true; }
  if (t == "false" || t == "no" || t == "off" || t == "0") { *out = false; return true; }
  return false;
}

bool parse_text(const std::string& s, std::string* out) {
  *out = s;
  return true;
}

template <typename V>
std::string type_text() {
  if constexpr (std::is_same_v<V, int>) return "an integer";
  else if constexpr (std::is_same_v<V, std::uint64_t>) return "a non-negative integer";
  else if constexpr (std::is_same_v<V, double>) return "a number";
  else if constexpr (std::is_same_v<V, bool>) return "true or false";
  else return "a string";
}

// The field of a config we only read; the accessor wants a mutable config, nothing is written.
ConfigField field_for_reading(const TrainConfig& cfg, const RecipeKey& key) {
  return key.field(const_cast<TrainConfig&>(cfg));
}

}  // namespace

namespace {
// The table runs in sections; each group starts at its first key and holds the keys up to the next
// group's first (the bookkeeping keys split into logging, checkpoints and the run's numerics).
std::vector<RecipeKey> grouped(std::vector<RecipeKey> keys) {
  const std::pair<const char*, const char*> starts[] = {
      {"model_name_or_path", "model"}, {"dataset_path", "data"},     {"learning_rate", "training"},
      {"logging_steps", "logging"},    {"save_strategy", "checkpoints"}, {"seed", "training"},
      {"use_peft", "LoRA"},            {"zero_stage", "parallel"},   {"do_eval", "evaluation"},
      {"vocab_size", "model"}};
  std::string group;
  for (RecipeKey& k : keys) {
    for (const auto& [first, name] : starts) {
      if (k.name == first) group = name;
    }
    k.group = group;
  }
  return keys;
}
}  // namespace

const std::vector<RecipeKey>& recipe_keys() {
  static const std::vector<RecipeKey> keys = grouped(build_recipe_keys());
  return keys;
}

const std::vector<std::string>& recipe_key_groups() {
  static const std::vector<std::string> groups = {"model",   "data",        "training", "evaluation",
                                                  "logging", "checkpoints", "parallel", "LoRA"};
  return groups;
}

const RecipeKey* find_recipe_key(const std::string& name) {
  for (const RecipeKey& key : recipe_keys()) {
    if (key.name == name) return &key;
    if (std::find(key.aliases.begin(), key.aliases.end(), name) != key.aliases.end()) return &key;
  }
  return nullptr;
}

std::string closest_recipe_key(const std::string& unknown) {
  const std::string needle = to_lower(unknown);
  // Allow more typos in longer names; two-letter names would match almost anything otherwise.
  const std::size_t allowed = needle.size() <= 4 ? 1 : needle.size() <= 8 ? 2 : 3;
  std::string best;
  std::size_t best_distance = allowed + 1;
  for (const RecipeKey& key : recipe_keys()) {
    std::vector<std::string> names = key.aliases;
    names.insert(names.begin(), key.name);
    for (const std::string& name : names) {
      const std::size_t d = edit_distance(needle, name);
      if (d < best_distance) {
        best_distance = d;
        best = key.name;
      }
    }
  }
  return best;
}

std::string format_double(double value) {
  char buf[48];
  int precision = 1;
  for (; precision < 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  // %g switches to an exponent once it reaches the precision; "500000.0" reads better than
  // "5.0e+05", so widen the precision for magnitudes up to 1e16.
  const int exponent =
      value == 0 || !std::isfinite(value) ? 0 : static_cast<int>(std::floor(std::log10(std::fabs(value))));
  if (exponent >= precision && exponent < 16) precision = exponent + 1;
  std::snprintf(buf, sizeof buf, "%.*g", precision, value);
  std::string text = buf;
  if (!std::isfinite(value)) return text;
  if (text.find('.') == std::string::npos) {
    const std::size_t e = text.find('e');
    text.insert(e == std::string::npos ? text.size() : e, ".0");
  }
  return text;
}

std::string value_text(const TrainConfig& cfg, const RecipeKey& key) {
  if (key.auto_flag && cfg.*key.auto_flag) return "auto";
  return std::visit(
      [](auto* p) -> std::string {
        using V = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<V, std::string>) return *p;
        else if constexpr (std::is_same_v<V, bool>) return *p ? "true" : "false";
        else if constexpr (std::is_same_v<V, double>) return format_double(*p);
        else return std::to_string(*p);
      },
      field_for_reading(cfg, key));
}

double numeric_value(const TrainConfig& cfg, const RecipeKey& key) {
  return std::visit(
      [](auto* p) -> double {
        using V = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<V, std::string> || std::is_same_v<V, bool>) return std::nan("");
        else return static_cast<double>(*p);
      },
      field_for_reading(cfg, key));
}

bool is_string_key(const RecipeKey& key) {
  TrainConfig probe;
  return std::holds_alternative<std::string*>(key.field(probe));
}

bool is_bool_key(const RecipeKey& key) {
  TrainConfig probe;
  return std::holds_alternative<bool*>(key.field(probe));
}

std::string expected_value_text(const RecipeKey& key) {
  TrainConfig probe;
  const std::string type =
      std::visit([](auto* p) { return type_text<std::remove_pointer_t<decltype(p)>>(); }, key.field(probe));
  if (!key.auto_flag) return type;
  return type == type_text<bool>() ? "true, false or auto" : type + " or auto";
}

void set_value_from_text(TrainConfig& cfg, const RecipeKey& key, const std::string& text,
                         const std::string& where) {
  if (key.auto_flag) cfg.*key.auto_flag = to_lower(text) == "auto";
  if (key.auto_flag && cfg.*key.auto_flag) {  // a bool key stays false until resolved; others keep their default
    std::visit(
        [](auto* p) {
          if constexpr (std::is_same_v<std::remove_pointer_t<decltype(p)>, bool>) *p = false;
        },
        key.field(cfg));
    return;
  }
  if (key.normalize) {
    std::string canonical;
    try {
      canonical = key.normalize(text);
    } catch (const std::invalid_argument& e) {
      throw ConfigError(where + ": key '" + key.name + "' " + e.what());
    }
    std::visit([&canonical](auto* p) { parse_text(canonical, p); }, key.field(cfg));
    return;
  }
  const bool parsed = std::visit([&text](auto* p) { return parse_text(text, p); }, key.field(cfg));
  if (!parsed) {
    throw ConfigError(where + ": key '" + key.name + "' expects " + expected_value_text(key) + ", got '" + text +
                      "'");
  }
}

}  // namespace shardft
