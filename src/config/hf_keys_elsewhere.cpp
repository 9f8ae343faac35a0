#include "config/hf_keys_elsewhere.hpp"

#include <utility>

namespace shardft {

namespace {

const std::pair<const char*, const char*> kKeys[] = {
    {"logging_strategy", "shardft logs every logging_steps optimizer steps (HF's steps strategy)"},
    {"lr_scheduler_kwargs",
     "each schedule's settings are keys of their own: min_lr, min_lr_rate, warmup_type, warmup_min_lr, "
     "warmup_min_ratio, cos_min_ratio (shardft keys)"},
    {"push_to_hub", "shardft uploads nothing; output_dir is an HF model directory: `huggingface-cli upload` it"},
    {"hub_model_id", "shardft uploads nothing; output_dir is an HF model directory: `huggingface-cli upload` it"},
    {"torch_compile", "shardft is compiled ahead of time; there is nothing to compile at start"},
    {"dataloader_num_workers", "the data is tokenized once at start (and cached in dataset_cache_dir); no workers"},
    {"fsdp", "use sharding_strategy (FULL_SHARD, HYBRID_SHARD, SHARD_GRAD_OP, NO_SHARD) or zero_stage"},
    {"fsdp_config", "use sharding_strategy and shard_group_size"},
    {"deepspeed", "give a DeepSpeed config on the command line: --deepspeed ds_config.json"},
    {"gradient_checkpointing_kwargs", "gradient_checkpointing: true recomputes each decoder layer; it takes no options"},
    {"per_gpu_train_batch_size", "use per_device_train_batch_size (HF's current name)"},
    {"per_gpu_eval_batch_size", "use per_device_eval_batch_size (HF's current name)"},
    {"save_safetensors", "checkpoints are HDF5 shards of the whole training state; model.safetensors is written at the end"},
    {"save_only_model", "checkpoints hold the whole training state (for an exact resume); model.safetensors holds the model"},
    {"group_by_length", "packing: true packs samples into full rows instead"},
    {"tf32", "fp32 GEMMs run in full fp32; use bf16: true for tensor cores"},
};

}  // namespace

std::string hf_key_elsewhere(const std::string& name) {
  for (const auto& [key, what] : kKeys) {
    if (name == key) return what;
  }
  return "";
}

}  // namespace shardft
