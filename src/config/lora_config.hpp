#pragma once
// LoRA as PEFT defines it (peft.LoraConfig), resolved from the recipe's keys: which linear layers of
// each decoder layer get a low-rank term y = W x + s * B (A dropout(x)), its rank, scale and dropout.
// s = lora_alpha / r, or lora_alpha / sqrt(r) with rsLoRA. The recipe keys keep PEFT's names.
#include <array>
#include <string>
#include <vector>

namespace shardft {

struct TrainConfig;

// The linear layers of a Llama-family decoder layer LoRA can target, under PEFT's module names.
enum class LoraModule { q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj };
constexpr int kNumLoraModules = 7;
const char* lora_module_name(LoraModule m);

struct LoraSpec {
  bool enabled = false;
  int r = 16;
  double alpha = 32.0;
  double dropout = 0.0;
  bool use_rslora = false;
  // QLoRA (load_in_4bit): the frozen matrices of every decoder linear (q/k/v/o/gate/up/down, targeted or
  // not; as bitsandbytes quantizes every nn.Linear but lm_head) are held as NF4 with double quantization.
  bool load_in_4bit = false;
  std::array<bool, kNumLoraModules> targets{};  // indexed by LoraModule

  bool targets_module(LoraModule m) const { return enabled && targets[static_cast<int>(m)]; }
  double scale() const;  // alpha / r, or alpha / sqrt(r) (rsLoRA)
  std::vector<std::string> target_names() const;  // in LoraModule order
};

// The recipe's lora_target_modules text ("" = PEFT's default for Llama-family models: q_proj and v_proj;
// "all-linear"; a module name; a list of them) as canonical text: "all-linear" or "[q_proj, v_proj]".
// Throws std::invalid_argument naming an unknown module and the valid ones.
std::string canonical_lora_targets_text(const std::string& text);
std::array<bool, kNumLoraModules> parse_lora_targets(const std::string& text);

// The recipe's LoRA keys resolved (enabled: use_peft or peft_type lora).
LoraSpec lora_spec(const TrainConfig& cfg);

}  // namespace shardft
