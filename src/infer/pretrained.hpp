#pragma once
// Fine-tuning starts from an HF model directory (`model_name_or_path`): every parameter is read from
// its safetensors by name, and each rank reads only the elements its ZeRO stage makes it own.
// In infer/ with the chat model, which reads HF directories the same way; training includes it from above.
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "model/param_layout.hpp"
#include "parallel/zero_engine.hpp"

namespace shardft {

// Checks the directory's tensors against the layout from their headers alone (nothing is read and
// nothing allocated, so a config.json without weights fails before the model's state exists): throws
// FormatError naming the file and tensor when a parameter is missing or has another shape, or when a
// tensor has no parameter to go to (a layer past config.json's num_hidden_layers, a module the decoder
// does not have): it would be dropped. Returns the tensors left out on purpose, each with why: RoPE's
// inv_freq buffers of old exports (recomputed) and an lm_head.weight next to tied embeddings.
// LoRA's factors (ParamSpec::is_lora) are not the base model's: they are neither looked for nor read.
std::vector<std::string> check_pretrained_weights(const ParamLayout& layout, const std::string& dir);

// check_pretrained_weights, then each rank reads the elements it owns (with LoRA: of the frozen base;
// the factors keep their values; QLoRA's matrices stored as bitsandbytes 4-bit are taken as their NF4
// bytes, other formats quantized at load). A NaN or Inf in any tensor is a
// FormatError naming the tensor and element, thrown on every rank of `world` together (collective).
void load_pretrained_weights(ZeroEngine& engine, const ParamLayout& layout, const std::string& dir,
                             Communicator& world);

// The same checks, then every parameter into `flat` (layout.total_numel() floats, layout order): one
// process holding the whole model (`shardft generate`); LoRA factors in `flat` are left as they are.
void read_pretrained_weights(const ParamLayout& layout, const std::string& dir, float* flat);

}  // namespace shardft
