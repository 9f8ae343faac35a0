#pragma once
// What makes a directory loadable by transformers beside its safetensors: config.json and the
// tokenizer files. A run that started from an HF model keeps that model's config.json (token ids,
// RoPE settings and every key shardft does not use) and its tokenizer; a model trained from scratch
// gets a config.json written from its shape.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/model_config.hpp"
#include "io/safetensors.hpp"

namespace shardft {

// The model's shape as checkpoint metadata keeps it (HF key names plus qkv_bias / o_bias).
nlohmann::json model_meta_json(const ModelConfig& m);
// Its inverse (checkpoints from before the bias flags have none); FormatError naming a missing key.
ModelConfig model_config_from_meta(const nlohmann::json& meta);

// model_name_or_path's config.json, or null when the run did not start from one.
nlohmann::json read_source_config(const std::string& model_name_or_path);

// config.json for weights of `model_meta`'s shape stored as `dtype`: the source config with its
// torch_dtype updated when there is one, else one written from the shape (LlamaForCausalLM, or
// Qwen2ForCausalLM when only q/k/v carry biases; token ids of the byte tokenizer).
nlohmann::json hf_config_json(const nlohmann::json& model_meta, const nlohmann::json& source_config, TensorDtype dtype);
void write_hf_config(const std::string& dir, const nlohmann::json& model_meta, const nlohmann::json& source_config,
                     TensorDtype dtype);

// Copies the HF tokenizer files (tokenizer.json, tokenizer_config.json, special_tokens_map.json)
// found at `from` (a directory, or a tokenizer.json file) into `dir`; returns the names copied.
// "byte" and "" copy nothing.
std::vector<std::string> copy_tokenizer_files(const std::string& from, const std::string& dir);

// Copies from_dir/generation_config.json into `dir` where there is one; whether it did.
bool copy_generation_config(const std::string& from_dir, const std::string& dir);

}  // namespace shardft
