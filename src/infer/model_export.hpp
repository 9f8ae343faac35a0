#pragma once
// The final model as an HF model directory in output_dir (weights only; run_end adds config.json and
// the tokenizer). Streamed: the engine hands the master weights over one block at a time, the writer
// converts each tensor to the export dtype and appends it to its shard, so no rank ever holds the
// model (the writer holds one block). With LoRA: the base with every adapter merged per block, and
// the adapter itself (adapter_config.json + adapter_model.safetensors, fp32 as PEFT keeps it).
#include <string>

#include <nlohmann/json.hpp>

#include "config/checkpoint_section.hpp"
#include "io/safetensors.hpp"
#include "io/safetensors_shards.hpp"
#include "parallel/zero_engine.hpp"

namespace shardft {

// export_dtype: fp32 / bf16 / fp16, or auto: the source config's torch_dtype (transformers 5 names it
// dtype), which transformers saves a model in when it loaded it so; fp32 without a source config or
// one naming no dtype. FormatError naming the config's dtype when it is none of float32 / bfloat16 /
// float16.
TensorDtype resolve_export_dtype(const std::string& export_dtype, const nlohmann::json& source_config);
const char* export_dtype_name(TensorDtype dtype);  // fp32, bf16, fp16: export_dtype's values

// Collective over the engine's group; only `writer` writes (the others take part in the gathers and
// hold nothing). A write that fails is reported after the last gather, so no rank is left waiting.
SafetensorsShardsReport save_model(ZeroEngine& engine, const ParamLayout& layout, const ModelExportConfig& cfg,
                                   TensorDtype dtype, bool writer);

}  // namespace shardft
