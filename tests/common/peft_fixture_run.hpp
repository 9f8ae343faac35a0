#pragma once
// Training shardft's LoRA the way tests/reference/make_peft_fixtures.py trained PEFT's (the case's
// base model, adapter_init, the batch of expected.json, AdamW with its settings, constant LR, no
// clipping, fp32, 3 steps on the same batch), and comparing with what PEFT + torch produced.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/peft_adapter.hpp"
#include "io/safetensors.hpp"
#include "tests/common/hf_fixture_batch.hpp"
#include "train/trainer.hpp"

namespace shardft {
namespace testing_util {

inline std::string peft_fixture_dir(const std::string& name) {
  return std::string(SHARDFT_REFERENCE_DIR) + "/peft/" + name;
}

inline nlohmann::json peft_expected(const std::string& name) {
  std::ifstream in(peft_fixture_dir(name) + "/expected.json");
  return nlohmann::json::parse(in);
}

// The recipe: every LoRA key from the adapter (with_adapter_lora_keys), the optimizer from expected.json.
inline TrainConfig peft_fixture_config(const std::string& name, const std::vector<std::string>& extra = {}) {
  const nlohmann::json ex = peft_expected(name);
  const nlohmann::json& opt = ex.at("optimizer");
  char buf[64];
  auto num = [&](double v) {
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  std::vector<std::string> flags = {
      "--model_name_or_path=" + std::string(SHARDFT_REFERENCE_DIR) + "/" + ex.at("base").get<std::string>(),
      "--adapter_path=" + peft_fixture_dir(name) + "/adapter_init",
      "--learning_rate=" + num(opt.at("lr").get<double>()),
      "--lr_scheduler_type=constant",
      "--max_grad_norm=0",
      "--weight_decay=" + num(opt.at("weight_decay").get<double>()),
      "--adam_beta1=" + num(opt.at("betas")[0].get<double>()),
      "--adam_beta2=" + num(opt.at("betas")[1].get<double>()),
      "--adam_epsilon=" + num(opt.at("eps").get<double>()),
  };
  flags.insert(flags.end(), extra.begin(), extra.end());
  return load_train_config("", flags);
}

// This rank's part of the case's batch: rank r of n takes rows r, r + n, ...; a rank left without a row
// takes row 0 with no targets (it computes, but adds nothing to the loss or the gradient).
inline TokenBatch peft_fixture_batch(const std::string& name, int rank = 0, int ranks = 1) {
  const nlohmann::json fx = hf_fixture(peft_expected(name).at("batch").get<std::string>());
  const int rows = static_cast<int>(fx.at("input_ids").size());
  if (ranks == 1) return hf_fixture_batch(fx);
  if (rank >= rows) {
    TokenBatch b = hf_fixture_batch(fx, 0, 1);
    std::fill(b.targets.begin(), b.targets.end(), -100);
    return b;
  }
  TokenBatch out;
  for (int r = rank; r < rows; r += ranks) {
    const TokenBatch b = hf_fixture_batch(fx, r, 1);
    out.batch += 1;
    out.seq = b.seq;
    out.real_tokens += b.real_tokens;
    out.input_ids.insert(out.input_ids.end(), b.input_ids.begin(), b.input_ids.end());
    out.position_ids.insert(out.position_ids.end(), b.position_ids.begin(), b.position_ids.end());
    out.seq_ids.insert(out.seq_ids.end(), b.seq_ids.begin(), b.seq_ids.end());
    out.sample_ids.insert(out.sample_ids.end(), b.sample_ids.begin(), b.sample_ids.end());
    out.targets.insert(out.targets.end(), b.targets.begin(), b.targets.end());
  }
  return out;
}

struct PeftFixtureRun {
  std::vector<double> losses;          // each step's, before its update
  std::vector<float> grads_step1;      // layout order (zero for the frozen base)
  std::vector<float> weights_before, weights_after;  // layout order, every parameter
  std::vector<double> step_comm_bytes;
  MemoryReport memory;
};

inline PeftFixtureRun run_peft_fixture(Trainer& tr, const TokenBatch& batch, int steps) {
  PeftFixtureRun run;
  run.weights_before = tr.engine().gather_master();
  for (int s = 0; s < steps; ++s) {
    const StepStats st = tr.step({batch});
    run.losses.push_back(st.loss);
    run.step_comm_bytes.push_back(st.comm_bytes);
    if (s == 0) run.grads_step1 = tr.engine().gather_grads();
  }
  run.weights_after = tr.engine().gather_master();
  run.memory = tr.engine().memory();
  return run;
}

// Per tensor max |ours - theirs| / max |theirs|, the worst over the PEFT-named tensors of `reference`
// (every LoRA factor of the layout must be there); `what` names the worst one.
inline double worst_factor_error(const ParamLayout& layout, const std::vector<float>& ours,
                                 const std::map<std::string, TensorF32>& reference, std::string* what = nullptr) {
  double worst = 0;
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    if (!spec.is_lora()) continue;
    const std::string key = "base_model.model." + spec.name;
    const auto it = reference.find(key);
    if (it == reference.end() || static_cast<std::int64_t>(it->second.data.size()) != spec.numel()) return INFINITY;
    double diff = 0, scale = 0;
    const float* mine = ours.data() + layout.offset(static_cast<int>(p));
    for (std::int64_t i = 0; i < spec.numel(); ++i) {
      diff = std::max(diff, std::abs(double(mine[i]) - double(it->second.data[i])));
      scale = std::max(scale, std::abs(double(it->second.data[i])));
    }
    const double err = diff / std::max(scale, 1e-30);
    if (err > worst) {
      worst = err;
      if (what) *what = key;
    }
  }
  return worst;
}

// Over the LoRA factors, the worst ||ours - reference|| / ||reference|| (per factor, Frobenius).
inline double worst_factor_norm_error(const ParamLayout& layout, const std::vector<float>& ours,
                                      const std::map<std::string, TensorF32>& reference) {
  double worst = 0;
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    if (!spec.is_lora()) continue;
    const auto it = reference.find("base_model.model." + spec.name);
    if (it == reference.end() || static_cast<std::int64_t>(it->second.data.size()) != spec.numel()) return INFINITY;
    double diff = 0, norm = 0;
    const float* mine = ours.data() + layout.offset(static_cast<int>(p));
    for (std::int64_t i = 0; i < spec.numel(); ++i) {
      const double r = it->second.data[i];
      diff += (mine[i] - r) * (mine[i] - r);
      norm += r * r;
    }
    worst = std::max(worst, std::sqrt(diff / std::max(norm, 1e-300)));
  }
  return worst;
}

inline std::map<std::string, TensorF32> peft_adapter_tensors(const std::string& dir) {
  return read_safetensors_f32(dir + "/" + kAdapterWeightsFile);
}

}  // namespace testing_util
}  // namespace shardft
