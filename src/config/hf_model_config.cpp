#include "config/hf_model_config.hpp"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "config/rope_scaling_json.hpp"
#include "config/train_config.hpp"

namespace shardft {
namespace {

using nlohmann::json;

class ConfigJson {
 public:
  explicit ConfigJson(const std::string& path) : path_(path) {
    std::ifstream in(path);
    if (!in) throw ConfigError("model_name_or_path: cannot open '" + path + "'");
    try {
      j_ = json::parse(in);
    } catch (const std::exception& e) {
      throw ConfigError(path + ": not valid JSON: " + e.what());
    }
    if (!j_.is_object()) throw ConfigError(path + ": expected a JSON object");
  }

  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw ConfigError(path_ + ": " + key + ": " + why);
  }
  bool present(const std::string& key) const { return j_.contains(key) && !j_[key].is_null(); }
  const json& at(const std::string& key) const { return j_.at(key); }

  int positive_int(const std::string& key) const {
    if (!present(key)) fail(key, "missing (expected a positive integer)");
    return positive_int_value(key);
  }
  int positive_int(const std::string& key, int fallback) const {
    return present(key) ? positive_int_value(key) : fallback;
  }
  double positive_number(const std::string& key, double fallback) const {
    if (!present(key)) return fallback;
    if (!j_[key].is_number() || j_[key].get<double>() <= 0) fail(key, "expected a positive number, got " + j_[key].dump());
    return j_[key].get<double>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!present(key)) return fallback;
    if (!j_[key].is_boolean()) fail(key, "expected true or false, got " + j_[key].dump());
    return j_[key].get<bool>();
  }

 private:
  int positive_int_value(const std::string& key) const {
    const json& v = j_[key];
    if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > 1LL << 30) {
      fail(key, "expected a positive integer, got " + v.dump());
    }
    return static_cast<int>(v.get<long long>());
  }
  std::string path_;
  json j_;
};

std::string model_type_of(const ConfigJson& c) {
  if (c.present("model_type")) {
    if (!c.at("model_type").is_string()) c.fail("model_type", "expected a string");
    const std::string t = c.at("model_type").get<std::string>();
    if (t == "llama" || t == "qwen2" || t == "qwen3" || t == "mistral") return t;
    c.fail("model_type", "\"" + t + "\" is not supported (expected llama, qwen2, qwen3 or mistral)");
  }
  if (c.present("architectures") && c.at("architectures").is_array() && !c.at("architectures").empty()) {
    const std::string a = c.at("architectures")[0].is_string() ? c.at("architectures")[0].get<std::string>() : "";
    if (a == "LlamaForCausalLM") return "llama";
    if (a == "Qwen2ForCausalLM") return "qwen2";
    if (a == "Qwen3ForCausalLM") return "qwen3";
    if (a == "MistralForCausalLM") return "mistral";
    c.fail("architectures", c.at("architectures")[0].dump() +
                                " is not supported (expected LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM or "
                                "MistralForCausalLM)");
  }
  c.fail("model_type", "missing (and no architectures either)");
}

// A quantized checkpoint (GPTQ, AWQ, fp8, bitsandbytes 8-bit) holds integer tensors the loader cannot
// read as weights: refused here, before anything is allocated, rather than at the first int8 tensor.
// bitsandbytes' 4-bit NF4 is shardft's own QLoRA format and is read; its other variants are named.
void read_bnb_4bit(const ConfigJson& c, HfModelConfig& out) {
  const json& q = c.at("quantization_config");
  const std::string method = q.is_object() && q.contains("quant_method") ? q.at("quant_method").dump() : q.dump();
  auto key = [&](const char* k) { return "quantization_config." + std::string(k); };
  auto is = [&](const char* k, const json& want) { return q.contains(k) && q.at(k) == want; };
  if (!is("quant_method", "bitsandbytes")) {
    c.fail("quantization_config", "a quantized checkpoint (quant_method " + method +
                                      ") is not supported: give the full-precision model (fp32, bf16 or fp16 safetensors) "
                                      "or a bitsandbytes 4-bit (nf4) save");
  }
  if (is("load_in_8bit", true)) {
    c.fail(key("load_in_8bit"), "a bitsandbytes 8-bit (LLM.int8) checkpoint is not supported; shardft reads 4-bit NF4 "
                                "saves (load_in_4bit) or full-precision models");
  }
  if (!is("load_in_4bit", true)) c.fail(key("load_in_4bit"), "expected true (a bitsandbytes 4-bit save), got " +
                                                                 (q.contains("load_in_4bit") ? q.at("load_in_4bit").dump() : "nothing"));
  if (!is("bnb_4bit_quant_type", "nf4")) {
    c.fail(key("bnb_4bit_quant_type"), (q.contains("bnb_4bit_quant_type") ? q.at("bnb_4bit_quant_type").dump() : "missing") +
                                           " is not supported; shardft reads nf4 only");
  }
  if (!is("bnb_4bit_use_double_quant", true)) {
    c.fail(key("bnb_4bit_use_double_quant"), "expected true: shardft reads NF4 with double-quantized absmax only");
  }
  if (q.contains("bnb_4bit_quant_storage") && !is("bnb_4bit_quant_storage", "uint8")) {
    c.fail(key("bnb_4bit_quant_storage"), q.at("bnb_4bit_quant_storage").dump() +
                                              " is not supported; the packed weights must be stored as uint8");
  }
  out.bnb_4bit = true;
  if (q.contains("bnb_4bit_compute_dtype") && q.at("bnb_4bit_compute_dtype").is_string()) {
    out.bnb_4bit_compute_dtype = q.at("bnb_4bit_compute_dtype").get<std::string>();
  }
}

}  // namespace

HfModelConfig read_hf_model_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw ConfigError("model_name_or_path: '" + dir + "' is not a directory (expected a local HF model directory)");
  }
  const ConfigJson c(path);
  HfModelConfig out;
  out.model_type = model_type_of(c);
  ModelConfig& m = out.model;
  m.vocab_size = c.positive_int("vocab_size");
  m.hidden_size = c.positive_int("hidden_size");
  m.intermediate_size = c.positive_int("intermediate_size");
  m.num_hidden_layers = c.positive_int("num_hidden_layers");
  m.num_attention_heads = c.positive_int("num_attention_heads");
  m.num_key_value_heads = c.positive_int("num_key_value_heads", m.num_attention_heads);
  if (m.num_attention_heads % m.num_key_value_heads != 0) {
    c.fail("num_key_value_heads", "must divide num_attention_heads " + std::to_string(m.num_attention_heads));
  }
  // head_dim (Qwen3, Mistral Nemo, Gemma-style shapes): any width; absent or null, hidden / heads.
  if (c.present("head_dim")) {
    m.explicit_head_dim = c.positive_int("head_dim");
  } else if (m.hidden_size % m.num_attention_heads != 0) {
    c.fail("num_attention_heads", "must divide hidden_size " + std::to_string(m.hidden_size) + " (no head_dim given)");
  }
  if (m.head_dim() % 2 != 0) {
    if (c.present("head_dim")) c.fail("head_dim", "is " + c.at("head_dim").dump() + "; it must be even (RoPE rotates pairs)");
    c.fail("num_attention_heads", "gives head_dim = hidden_size / num_attention_heads = " +
                                      std::to_string(m.head_dim()) + ", which must be even (RoPE rotates pairs)");
  }
  if (c.present("hidden_act") &&
      !(c.at("hidden_act").is_string() && c.at("hidden_act").get<std::string>() == "silu")) {
    c.fail("hidden_act", c.at("hidden_act").dump() + " is not supported (expected \"silu\")");
  }
  // Llama, Qwen2 and Mistral rotate every dimension of a head; transformers would read a
  // partial_rotary_factor into the frequencies, and its Llama attention would then fail on the shapes.
  if (c.present("partial_rotary_factor") &&
      !(c.at("partial_rotary_factor").is_number() && c.at("partial_rotary_factor").get<double>() == 1.0)) {
    c.fail("partial_rotary_factor", c.at("partial_rotary_factor").dump() +
                                        " is not supported (llama, qwen2 and mistral rotate the whole head: 1.0)");
  }
  if (c.boolean("mlp_bias", false)) c.fail("mlp_bias", "true is not supported (SwiGLU projections without biases)");
  if (c.present("quantization_config")) read_bnb_4bit(c, out);
  m.rope_theta = c.positive_number("rope_theta", 10000.0);
  if (c.present("rope_scaling")) m.rope_scaling = parse_rope_scaling(c.at("rope_scaling"), path + ": ");
  m.rms_norm_eps = c.positive_number("rms_norm_eps", 1e-6);
  m.tie_word_embeddings = c.boolean("tie_word_embeddings", false);  // Llama/Qwen2/Mistral configs default to untied
  m.max_position_embeddings = c.positive_int("max_position_embeddings", 2048);
  m.initializer_range = c.positive_number("initializer_range", 0.02);
  if (out.model_type == "qwen2") {
    m.qkv_bias = true;
    if (c.boolean("use_sliding_window", false)) out.sliding_window = c.positive_int("sliding_window", 4096);
  } else if (out.model_type == "qwen3") {  // Qwen3: attention_bias on q/k/v/o (off by default), q_norm/k_norm
    m.qkv_bias = m.o_bias = c.boolean("attention_bias", false);
    m.qk_norm = true;
    if (c.boolean("use_sliding_window", false)) out.sliding_window = c.positive_int("sliding_window", 4096);
  } else if (out.model_type == "llama") {
    m.qkv_bias = m.o_bias = c.boolean("attention_bias", false);
  } else if (c.present("sliding_window")) {  // mistral
    out.sliding_window = c.positive_int("sliding_window");
  }
  return out;
}

}  // namespace shardft
