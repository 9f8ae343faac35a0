#pragma once
// The engine's and the step's sections of the recipe, built by config/recipe_sections.hpp: ZeRO
// (parallel/zero/), what the memory preflight assumes of the activations (parallel/estimate/), fp16's
// loss scaler and the learning-rate schedule (train/).
#include <cstdint>
#include <string>

#include "config/compute_dtype.hpp"

namespace shardft {

// The sharding engine's settings: what every part of the engine is configured from.
struct ZeroConfig {
  int stage = 0;
  ComputeDtype dtype = ComputeDtype::fp32;   // weights travel in it (bf16 gathers are lossless then)
  bool bf16_gradients = false;               // communication_data_type bf16: reduce gradients as bf16
  bool quantized_weights = false;            // qwZ: stage-3 gathers as int8 blocks
  bool quantized_gradients = false;          // qgZ: stage 2/3 reduce-scatter as int4, hierarchical
  int hpz_partition_size = 1;                // hpZ: > 1 keeps a secondary copy for backward gathers in groups this big
  int quantization_block = 64;
  // Communication buckets, in elements (parallel/grad_buckets.hpp). Gradients: each bucket's
  // reduce-scatter starts when it fills during backward (stages 1-3; stage 1 in the last micro-batch);
  // <= 0 is one unit (layer block) per bucket. Not qgZ, whose reduction stays blocking per unit.
  std::int64_t reduce_bucket_elements = 0;
  bool overlap_comm = true;                  // false: each bucket is waited for when it starts (for A/B runs)
  // Stages 1-2: elements of updated-weight gathers in flight at once after the optimizer step (<= 0: one unit).
  std::int64_t allgather_bucket_elements = 0;
  // Stage 3: elements gathered ahead of the block being computed; the next block is always prefetched,
  // further blocks while the weights gathered ahead stay within this.
  std::int64_t prefetch_elements = 0;
  // Stage 0: the optimizer step runs unit by unit on a device queue of its own, overlapped with the next
  // step's forward (parallel/zero/optimizer_shard.hpp). The same arithmetic: the results do not change.
  bool overlap_optimizer = false;
  int overlap_gemm_sm_reserve = 0;  // overlapped: SMs the GEMMs leave to the update while it runs
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_epsilon = 1e-8, weight_decay = 0.0;
};


// What a micro-batch's activations depend on.
struct ActivationShape {
  int batch = 1, seq = 1;
  bool checkpointing = false, eager_attention = false, bf16 = false;
  int logits_chunk_tokens = 0;  // 0: the whole micro-batch's logits at once
  // attn_implementation lets a bf16 step run the fused attention kernel where the build has it (the
  // preflight asks the build, parallel/estimate/memory_preflight.cpp, as infer/attention_choice.cpp does).
  bool fused_attention_allowed = false;
};


// fp16's loss scale (train/loss_scaler.hpp), DeepSpeed's keys resolved.
struct LossScalerConfig {
  bool dynamic = true;
  double initial_scale = 65536;  // 2^initial_scale_power, or the static loss_scale
  long window = 1000;
  int hysteresis = 2;
  bool consecutive_hysteresis = false;
  double min_scale = 1;
};


// A learning-rate schedule (train/lr_schedule.hpp has the formulas), its warm-up and kwargs resolved.
struct LrScheduleConfig {
  std::string type = "constant";
  double peak_lr = 1e-3;
  long warmup_steps = 0;
  long total_steps = 1;
  double min_lr_rate = 0.0;  // cosine_with_min_lr only
  double num_cycles = 0.5;   // cosine, cosine_with_min_lr (0.5), cosine_with_restarts (1), warmup_stable_decay
  // warmup_stable_decay only
  long stable_steps = 0, decay_steps = 0;
  double min_lr_ratio = 0.0;
  std::string wsd_warmup = "linear", wsd_decay = "cosine";  // linear | cosine | 1-sqrt
  // DeepSpeed's schedules only (ds_warmup, ds_warmup_decay, ds_warmup_cosine)
  std::string warmup_type = "log";  // log | linear
  double warmup_min_lr = 0.0;       // ds_warmup, ds_warmup_decay: the warm-up's start
  double warmup_min_ratio = 0.0;    // ds_warmup_cosine: the warm-up's start, a fraction of peak_lr
  double cos_min_ratio = 1e-4;      // ds_warmup_cosine: the end, a fraction of peak_lr
};

}  // namespace shardft
