#pragma once
// Fine-tuning starts from an HF model directory (`model_name_or_path`): every parameter is read from
// its safetensors by name, and each rank reads only the elements its ZeRO stage makes it own.
#include <string>

#include "model/param_layout.hpp"
#include "parallel/zero_engine.hpp"

namespace shardft {

// Throws FormatError naming the file and tensor when a parameter is missing or has another shape.
// Tensors the decoder has no use for (e.g. rotary_emb.inv_freq of old exports) are ignored.
void load_pretrained_weights(ZeroEngine& engine, const ParamLayout& layout, const std::string& dir);

// The same checks, then every parameter into `flat` (layout.total_numel() floats, layout order): one
// process holding the whole model (`shardft generate`).
void read_pretrained_weights(const ParamLayout& layout, const std::string& dir, float* flat);

}  // namespace shardft
