#pragma once
// LoRA's output: the trained A / B as a PEFT adapter folder (adapter_config.json +
// adapter_model.safetensors, PEFT's names, which peft.PeftModel.from_pretrained loads as they are), and
// the base with the adapter merged (W + scale · B A) for an HF model directory.
#include <string>
#include <vector>

#include "io/peft_adapter.hpp"
#include "model/layout_window.hpp"
#include "model/param_layout.hpp"

namespace shardft {

// The layout's LoRA spec as PEFT's config; base: the model the adapter applies to (base_model_name_or_path).
LoraAdapterConfig adapter_config_of(const LoraSpec& spec, const std::string& base);
// Every A / B of the layout from `values` (layout order), keyed by the adapted base weight's name.
LoraTensors lora_tensors_of(const ParamLayout& layout, const std::vector<float>& values);
// The A / B that lie in `window` added to `out` (an export that streams the model block by block).
void add_lora_tensors(const ParamLayout& layout, const LayoutWindow& window, LoraTensors& out);
// The base weights of `values` (layout order) with every LoRA term merged into its weight.
void merge_lora_terms(const ParamLayout& layout, std::vector<float>& values);
// The same for the terms whose A lies in `window` (their B and base weight lie in it too: a layer's
// block holds all three).
void merge_lora_terms(const ParamLayout& layout, LayoutWindow& window);

}  // namespace shardft
