#include "infer/hf_export.hpp"

#include <filesystem>
#include <fstream>

#include "config/rope_scaling_json.hpp"
#include "config/train_config.hpp"

namespace shardft {
namespace fs = std::filesystem;

namespace {
const char* const kTokenizerFiles[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"};

const char* torch_dtype(TensorDtype dtype) {
  return dtype == TensorDtype::F32 ? "float32" : dtype == TensorDtype::BF16 ? "bfloat16" : "float16";
}
}  // namespace

nlohmann::json model_meta_json(const ModelConfig& m) {
  nlohmann::json j = {{"vocab_size", m.vocab_size}, {"hidden_size", m.hidden_size}, {"num_hidden_layers", m.num_hidden_layers},
          {"num_attention_heads", m.num_attention_heads}, {"num_key_value_heads", m.num_key_value_heads},
          {"intermediate_size", m.intermediate_size}, {"rope_theta", m.rope_theta}, {"rms_norm_eps", m.rms_norm_eps},
          {"tie_word_embeddings", m.tie_word_embeddings}, {"max_position_embeddings", m.max_position_embeddings},
          {"qkv_bias", m.qkv_bias}, {"o_bias", m.o_bias}};
  // Only where there is one, so that plain-RoPE, hidden / heads metadata reads as before.
  if (!m.rope_scaling.plain()) j["rope_scaling"] = rope_scaling_json(m.rope_scaling);
  if (m.explicit_head_dim > 0) j["head_dim"] = m.explicit_head_dim;
  if (m.qk_norm) j["qk_norm"] = true;
  return j;
}

ModelConfig model_config_from_meta(const nlohmann::json& j) {
  ModelConfig m;
  try {
    m.vocab_size = j.at("vocab_size").get<int>();
    m.hidden_size = j.at("hidden_size").get<int>();
    m.num_hidden_layers = j.at("num_hidden_layers").get<int>();
    m.num_attention_heads = j.at("num_attention_heads").get<int>();
    m.num_key_value_heads = j.at("num_key_value_heads").get<int>();
    m.intermediate_size = j.at("intermediate_size").get<int>();
    m.rope_theta = j.at("rope_theta").get<double>();
    m.rms_norm_eps = j.at("rms_norm_eps").get<double>();
    m.tie_word_embeddings = j.at("tie_word_embeddings").get<bool>();
    m.max_position_embeddings = j.at("max_position_embeddings").get<int>();
    m.qkv_bias = j.value("qkv_bias", false);
    m.o_bias = j.value("o_bias", false);
    m.qk_norm = j.value("qk_norm", false);
    m.explicit_head_dim = j.value("head_dim", 0);
    if (j.contains("rope_scaling")) m.rope_scaling = parse_rope_scaling(j.at("rope_scaling"), "checkpoint model: ");
  } catch (const nlohmann::json::exception& e) {
    throw FormatError("checkpoint model " + j.dump() + ": " + e.what());
  } catch (const ConfigError& e) {
    throw FormatError(e.what());
  }
  return m;
}

nlohmann::json read_source_config(const std::string& model_name_or_path) {
  if (model_name_or_path.empty()) return nullptr;
  const std::string path = (fs::path(model_name_or_path) / "config.json").string();
  std::ifstream in(path);
  if (!in) throw FormatError("cannot read '" + path + "'");
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw FormatError(path + ": not valid JSON: " + e.what());
  }
}

nlohmann::json hf_config_json(const nlohmann::json& model, const nlohmann::json& source, TensorDtype dtype) {
  if (source.is_object()) {
    nlohmann::json c = source;
    c["torch_dtype"] = torch_dtype(dtype);
    if (c.contains("dtype")) c["dtype"] = torch_dtype(dtype);  // transformers 5's name for it
    c.erase("quantization_config");  // a 4-bit base is written dequantized: full-precision weights
    return c;
  }
  nlohmann::json c = model;
  // The bias and norm flags name the HF architecture: q/k/v biases alone are Qwen2, q_norm/k_norm Qwen3
  // (attention_bias: q/k/v/o biases or none), q/k/v/o biases Llama's attention_bias (checkpoints from
  // before the flags have none).
  const bool qkv_bias = model.value("qkv_bias", false), o_bias = model.value("o_bias", false);
  const bool qk_norm = model.value("qk_norm", false);
  c.erase("qkv_bias");
  c.erase("o_bias");
  c.erase("qk_norm");
  if (o_bias && !qkv_bias) throw FormatError("no HF architecture has an o_proj bias without q/k/v biases");
  if (qk_norm) {
    if (qkv_bias != o_bias) throw FormatError("no HF architecture has q_norm/k_norm with q/k/v biases alone");
    c["architectures"] = {"Qwen3ForCausalLM"};
    c["model_type"] = "qwen3";
    c["attention_bias"] = qkv_bias;
    c["use_sliding_window"] = false;
  } else if (qkv_bias && !o_bias) {
    c["architectures"] = {"Qwen2ForCausalLM"};
    c["model_type"] = "qwen2";
  } else {
    c["architectures"] = {"LlamaForCausalLM"};
    c["model_type"] = "llama";
    c["attention_bias"] = qkv_bias;
    c["mlp_bias"] = false;
  }
  c["hidden_act"] = "silu";
  c["head_dim"] = model.value("head_dim", model.at("hidden_size").get<int>() / model.at("num_attention_heads").get<int>());
  c["torch_dtype"] = torch_dtype(dtype);
  c["bos_token_id"] = 257;  // the byte tokenizer's <|bos|>, <|end|>, <|pad|>
  c["eos_token_id"] = 258;
  c["pad_token_id"] = 256;
  return c;
}

void write_hf_config(const std::string& dir, const nlohmann::json& model, const nlohmann::json& source,
                     TensorDtype dtype) {
  const std::string path = dir + "/config.json";
  std::ofstream out(path, std::ios::trunc);
  out << hf_config_json(model, source, dtype).dump(2) << "\n";
  if (!out.flush()) throw FormatError("cannot write '" + path + "'");
}

std::vector<std::string> copy_tokenizer_files(const std::string& from, const std::string& dir) {
  std::vector<std::string> copied;
  if (from.empty() || from == "byte") return copied;
  std::error_code ec;
  const fs::path src_dir = fs::is_directory(from, ec) ? fs::path(from) : fs::path(from).parent_path();
  for (const char* name : kTokenizerFiles) {
    // A lone tokenizer.json may be named otherwise; it is copied under the name HF looks for.
    const fs::path src = (std::string(name) == "tokenizer.json" && !fs::is_directory(from, ec)) ? fs::path(from)
                                                                                               : src_dir / name;
    if (!fs::is_regular_file(src, ec)) continue;
    if (fs::exists(fs::path(dir) / name, ec) && fs::equivalent(src, fs::path(dir) / name, ec)) continue;
    fs::copy_file(src, fs::path(dir) / name, fs::copy_options::overwrite_existing);
    copied.emplace_back(name);
  }
  return copied;
}

bool copy_generation_config(const std::string& from_dir, const std::string& dir) {
  std::error_code ec;
  const fs::path src = fs::path(from_dir) / "generation_config.json", dst = fs::path(dir) / "generation_config.json";
  if (!fs::is_regular_file(src, ec)) return false;
  if (fs::exists(dst, ec) && fs::equivalent(src, dst, ec)) return true;
  fs::copy_file(src, dst, fs::copy_options::overwrite_existing);
  return true;
}

}  // namespace shardft
