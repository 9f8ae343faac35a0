#pragma once
// The recipe: every key a run reads, under trl / HF TrainingArguments names where one exists.
// Defaults here are the defaults of `shardft train` with no recipe at all.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/config_error.hpp"
#include "config/model_config.hpp"

namespace shardft {


// The learning rate a run that fine-tunes model_name_or_path takes when none is set (trl's SFTConfig).
constexpr double kFineTuneLearningRate = 2e-5;

struct TrainConfig {
  ModelConfig model;

  // model: a local HF directory (config.json + safetensors) to fine-tune; "": train `model` from scratch
  std::string model_name_or_path;

  // data
  std::string dataset_path = "jobs/data/sft_train.jsonl";       // trl: dataset_name / train file
  std::string eval_dataset_path = "jobs/data/sft_eval.jsonl";
  int max_seq_length = 64;
  bool packing = false;                      // trl: pack samples into rows of max_seq_length
  std::string packing_strategy = "ffd";      // trl's key: ffd (first-fit decreasing) | bfd (best-fit, trl's default)
  // trl's loss switches: true, the loss is on the assistant's turns of a conversation / the completion of a
  // prompt-completion record; false, on every token (trl's default for conversations is false, shardft's true)
  bool assistant_only_loss = true;
  bool completion_only_loss = true;
  std::string datasets;                      // several training files mixed by weight, instead of dataset_path
                                             // (canonical JSON list; config/data_keys.hpp)
  std::string dataset_text_field = "text";   // trl: the column of plain-text datasets
  std::string role_map;                      // extra dataset roles -> system|user|assistant (canonical JSON)
  bool skip_bad_samples = false;             // skip malformed records (counted and logged) instead of failing
  std::string tokenizer_name_or_path = "byte";  // "byte", a tokenizer.json, or a directory holding one
  std::string chat_template = "auto";        // auto (the model's own, else shardft) | shardft | chatml (Qwen2) |
                                             // llama3 | plain | a .jinja file or tokenizer_config.json
  std::string dataset_cache_dir = ".cache/tokenized";  // tokenized sets are cached here by content; "": no cache

  // optimisation
  double learning_rate = 3e-3;               // unset with model_name_or_path: kFineTuneLearningRate
  std::string lr_scheduler_type = "cosine";  // constant | linear | cosine | cosine_with_min_lr | DeepSpeed's:
                                             // ds_warmup | ds_warmup_decay | ds_warmup_cosine (train/lr_schedule.hpp)
  int warmup_steps = 0;
  double warmup_ratio = 0.0;                 // used when warmup_steps == 0
  std::string lr_scheduler_kwargs;           // HF's key: the schedule's own settings (config/lr_scheduler_kwargs.hpp)
  double min_lr = 0.0;                       // cosine_with_min_lr: absolute floor ...
  double min_lr_rate = 0.0;                  // ... or a fraction of learning_rate (one of the two)
  std::string warmup_type = "log";           // ds_*: DeepSpeed's warm-up shape, log | linear
  double warmup_min_lr = 0.0;                // ds_warmup, ds_warmup_decay: the warm-up's start (and decay's end)
  double warmup_min_ratio = 0.0;             // ds_warmup_cosine: the warm-up's start, a fraction of learning_rate
  double cos_min_ratio = 1e-4;               // ds_warmup_cosine: the end, a fraction of learning_rate
  double weight_decay = 0.0;
  double max_grad_norm = 1.0;                // <= 0 disables clipping
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  std::string optim = "adamw_torch";         // HF's key: the AdamW names (fp32 moments, decoupled weight decay)

  // batch and length of the run
  int per_device_train_batch_size = 8;
  int train_batch_size = 0;                  // global batch (DeepSpeed's key); > 0: must equal micro x accumulation x ranks
  int per_device_eval_batch_size = 64;
  int gradient_accumulation_steps = 1;
  double num_train_epochs = 3.0;
  int max_steps = -1;                        // > 0 overrides num_train_epochs

  // bookkeeping
  int logging_steps = 10;
  bool logging_first_step = false;           // HF's key: log the first step too
  // where the logged metrics also go (metrics.jsonl in output_dir always): none | tensorboard | all (HF's
  // names; shardft's only integration is TensorBoard, so all means tensorboard)
  std::string report_to = "none";
  std::string logging_dir;                   // TensorBoard's folder; "": output_dir/runs/<run_name, or date_host>
  std::string run_name;                      // names the run's default logging_dir
  bool disable_tqdm = false;                 // HF's key: no progress bar even on a terminal
  std::string log_level = "passive";         // HF's key: passive / info (the default log) | debug (+ diagnostics)
  std::string save_strategy = "steps";       // HF's key: steps (save_steps and the end) | epoch | best | no
  int save_steps = 0;                        // checkpoint every this many steps; 0: only at the end
  int save_total_limit = 0;                  // keep the newest N checkpoints; 0: all
  std::string resume_from_checkpoint;        // "": fresh start; "true": the newest good one; or a path
  // The final model's weight files: their dtype (auto: model_name_or_path's torch_dtype, else fp32 |
  // fp32 | bf16 | fp16) and save_pretrained's shard size (config/memory_size.hpp)
  std::string export_dtype = "auto";
  std::string max_shard_size = "5GB";
  std::string output_dir = "runs/default";
  bool overwrite_output_dir = false;         // HF's key: a fresh run may clear an earlier run's checkpoints and metrics
  std::uint64_t seed = 42;
  int data_seed = -1;                        // HF's key: the data order's seed (sampler, mixture, val split); -1: seed
  bool bf16 = false;
  bool bf16_auto = false;                    // bf16: auto, until resolve_bf16_auto decides (bf16 stays false)
  // fp16 compute with loss scaling (DeepSpeed's fp16 block; config/deepspeed_json.cpp maps it here)
  bool fp16 = false;
  double loss_scale = 0;                     // 0: dynamic; > 0: this static scale
  int initial_scale_power = 16;              // dynamic: the first scale is 2^this
  int loss_scale_window = 1000;              // dynamic: double the scale after this many steps without overflow
  int hysteresis = 2;                        // dynamic: overflows tolerated before the scale halves
  bool consecutive_hysteresis = false;       // dynamic: a good step refills the hysteresis
  double min_loss_scale = 1;                 // dynamic: the scale never halves below this
  double neftune_noise_alpha = 0;            // HF's key: NEFTune's uniform noise on the embeddings while training; 0: off
  bool gradient_checkpointing = false;       // keep only layer inputs; recompute each layer in backward
  int logits_chunk_tokens = 256;             // LM head + cross-entropy in chunks of this many tokens; 0: all
  bool logits_chunk_auto = true;             // logits_chunk_tokens: auto, until resolve_logits_chunk_auto decides
  // HF's key: auto | sdpa | flash_attention_2 (the fused bf16 kernels where built, infer/attention_choice.hpp)
  // | memory_efficient (log-sum-exp kernels) | eager
  std::string attn_implementation = "auto";
  bool deterministic_attention = true;       // false: cuDNN's backward with fp32 atomics for dq (not reproducible)
  double peak_tflops = 0.0;                  // per rank, for MFU in the logs; 0: measure this rank's sgemm rate

  // LoRA (PEFT's LoraConfig names; config/lora_config.hpp resolves them)
  bool use_peft = false;                     // train LoRA adapters on a frozen base
  std::string peft_type;                     // "lora" is the same as use_peft: true
  int lora_r = 16;                           // trl's defaults
  double lora_alpha = 32.0;
  double lora_dropout = 0.05;
  std::string lora_target_modules;           // "": q_proj, v_proj (PEFT's Llama default); all-linear; a list
  bool use_rslora = false;                   // scale alpha / sqrt(r) instead of alpha / r
  std::string lora_bias = "none";            // PEFT's bias: only none
  std::string adapter_path;                  // a PEFT adapter folder to start A and B from
  // QLoRA (transformers' BitsAndBytesConfig names): the frozen base's linear weights as NF4
  bool load_in_4bit = false;
  std::string bnb_4bit_quant_type = "nf4";   // only nf4
  bool bnb_4bit_use_double_quant = true;     // only true (bitsandbytes' nested absmax, block 256)
  std::string bnb_4bit_compute_dtype;        // "": the run's dtype; else must name it (bfloat16 / float32)

  // data parallelism
  int zero_stage = 0;                        // 0: replicate, 1: shard optimizer, 2: + gradients, 3: + weights
  int ranks_per_node = 0;                    // > 0: topology override (4 ranks on one machine as 2 nodes of 2)
  std::string sharding_strategy;             // FSDP's names: FULL_SHARD, HYBRID_SHARD, SHARD_GRAD_OP, NO_SHARD
  int shard_group_size = 0;                  // ranks that split one model copy; 0: all (or a node, for HYBRID_SHARD)
  std::string collectives = "auto";          // backend of every group's collectives: auto | mpi | nccl
  double collective_timeout_s = 1800;        // a wait for a collective longer than this aborts the job
  std::string max_memory_per_rank = "auto";  // preflight budget: auto (measured) | none (unchecked) | a size (config/memory_size.hpp)
  std::string communication_data_type = "fp32";  // gradient reductions: fp32 or bf16 (DeepSpeed's key)
  std::string reduce_bucket_size = "auto";     // elements per gradient bucket, DeepSpeed's key (config/zero_buckets.hpp);
  std::string allgather_bucket_size = "auto";  // elements of weight gathers in flight (stage 3: prefetch window when set)
  bool overlap_comm = true;                  // reduce-scatter gradient buckets while backward continues
  // stage 0: each block's update on a queue of its own, under the next forward: auto | true | false
  // (optimizer_overlaps says what auto means)
  std::string optimizer_overlap = "auto";
  // SMs the GEMMs leave to the overlapped update while it runs (kernels/side_queue.hpp); 0: none
  int optimizer_overlap_sms = 0;
  // ZeRO++ (DeepSpeed's keys)
  bool zero_quantized_weights = false;       // qwZ: stage-3 weight gathers as int8 blocks
  bool zero_quantized_gradients = false;     // qgZ: gradient reduce-scatter as int4 blocks, intra-node first
  int zero_hpz_partition_size = 1;           // hpZ: > 1: backward gathers within groups of this many ranks
  int zero_quantization_block_size = 64;     // elements per quantization block (one fp32 scale each)

  // evaluation
  bool do_eval = true;                       // evaluate on eval_dataset_path at the end
  int eval_max_new_tokens = 32;
  int eval_samples = -1;                     // -1: the whole eval set
  // during training (HF's TrainingArguments names; train/training_eval.hpp)
  std::string eval_strategy = "no";          // no | steps (every eval_steps) | epoch (each epoch's end)
  int eval_steps = 0;                        // 0: logging_steps (HF's default)
  bool eval_on_start = false;                // evaluate once before the first step
  bool eval_generate = false;                // evaluations during training also generate (exact match); else loss only
  double val_set_size = 0;                   // axolotl's: hold out this fraction (< 1) or count (>= 1) of the
                                             // training samples as the eval set, instead of eval_dataset_path
  std::string metric_for_best_model;         // "": loss (HF's default); loss | exact_match, with or without eval_
  std::string greater_is_better;             // "": false for a loss, true otherwise (HF's rule); true | false
  bool load_best_model_at_end = false;       // the exported model is the best checkpoint's
  int early_stopping_patience = 0;           // > 0: stop after this many evaluations without improvement
  double early_stopping_threshold = 0;       // an improvement must exceed this to count (HF's callback)

  // where each key came from, for error messages and the startup report ("recipe.yaml:12", "--seed")
  std::vector<std::pair<std::string, std::string>> sources;
};

// Builds a TrainConfig: defaults, then the YAML recipe (when config_path is not empty), then the
// DeepSpeed config (when deepspeed_path is not empty; "auto" keeps the recipe's value), then
// command-line overrides (`--key=value` or `--key value`), then validation.
// Throws ConfigError for an unknown key, a value of the wrong type, an out-of-range value,
// or an inconsistent combination; the message names file:line or the flag.
TrainConfig load_train_config(const std::string& config_path, const std::vector<std::string>& overrides,
                              const std::string& deepspeed_path = "");

// load_train_config on what has been read already: `recipe_text` is the recipe file `recipe_path` (no
// recipe when the path is empty) and `ds` the DeepSpeed config (read_deepspeed_config or
// parse_deepspeed_config; default-constructed: none). The same errors, naming recipe_path.
struct DeepSpeedConfig;
TrainConfig train_config_from_text(const std::string& recipe_path, const std::string& recipe_text,
                                   const DeepSpeedConfig& ds, const std::vector<std::string>& overrides);

// FSDP's sharding_strategy in ZeRO terms: the stage it means (-1 when none is given) and whether it
// shards within a node and replicates across nodes.
int stage_of_sharding_strategy(const std::string& strategy);
bool is_hybrid_strategy(const std::string& strategy);

// Where the recipe, DeepSpeed config or a flag set `key` ("recipe.yaml:12", "--lora_r"); "" when it was
// left at its default.
std::string source_of(const TrainConfig& cfg, const std::string& key);

// Validation alone (load_train_config calls it); throws ConfigError naming the key.
void validate(const TrainConfig& cfg);

// Keys a recipe, DeepSpeed config or flag set to a non-default value that this run does not use: LoRA's
// without LoRA, loss scaling without fp16, bitsandbytes' without load_in_4bit. One line each, naming
// where the key was set, its value and why it has no effect; the run logs them as warnings (a key left
// in a recipe while its feature is switched off is legitimate, but never silently ignored).
std::vector<std::string> ineffective_keys(const TrainConfig& cfg);

// Evaluation during training: steps between evaluations under eval_strategy steps (eval_steps, or
// logging_steps where it is 0); the metric judging the best checkpoint without its eval_ prefix ("loss",
// "exact_match"); and whether higher is better (greater_is_better, else HF's rule: not for a loss).
int eval_interval_steps(const TrainConfig& cfg);
// Whether the run evaluates before or during training (eval_strategy steps | epoch, or eval_on_start).
bool evaluates_during_training(const TrainConfig& cfg);
// Whether a best checkpoint is judged (load_best_model_at_end, save_strategy best or early stopping:
// HF then sets metric_for_best_model); only then is the best kept from rotation.
bool judges_best_model(const TrainConfig& cfg);
std::string best_model_metric(const TrainConfig& cfg);
bool best_metric_greater_is_better(const TrainConfig& cfg);

// bf16: auto, decided for the device the run computes on: bf16 where `supported` (and fp16 is off),
// recorded as the key's source with `why` ("auto: NVIDIA H100 ... has bf16 tensor cores"), then validated
// again. Nothing where bf16 was not auto.
void resolve_bf16_auto(TrainConfig& cfg, bool supported, const std::string& why);
// logits_chunk_tokens: auto, decided for the device (config/logits_chunk.hpp, after bf16 is: the logits'
// bytes depend on it): `tokens`, recorded as the key's source with "auto: <why>". Nothing where it was
// set. Until then an auto key holds its default, the host's 256.
void resolve_logits_chunk_auto(TrainConfig& cfg, int tokens, const std::string& why);

// Whether the optimizer step overlaps the next forward (optimizer_overlap): true and false as set; auto:
// on at zero_stage 0 of a full fine-tune where the device has queues of its own (a GPU build,
// `separate_queues`): LoRA's update is too small to hide, and stages 1-3 gather the updated shards at once.
bool optimizer_overlaps(const TrainConfig& cfg, bool separate_queues);

// The seed of the data order (epochs, the mixture's draw, the val_set_size split): data_seed where set.
std::uint64_t data_order_seed(const TrainConfig& cfg);

// "key: value" lines of every key, for the startup report and for saving beside a run.
std::string to_yaml(const TrainConfig& cfg);

}  // namespace shardft
