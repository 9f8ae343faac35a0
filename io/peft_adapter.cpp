#include "io/peft_adapter.hpp"

#include <cmath>
#include <filesystem>
#include <set>
#include <vector>

#include "io/checkpoint_meta.hpp"

namespace shardft {

namespace {

const char* kPeftPrefix = "base_model.model.";  // PeftModelForCausalLM.base_model (LoraModel).model
const char* kLayersPrefix = "model.layers.";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

const char* parent_of(const std::string& module) {  // where HF puts the module inside a decoder layer
  return module == "gate_proj" || module == "up_proj" || module == "down_proj" ? "mlp" : "self_attn";
}

bool is_linear_module(const std::string& m) {
  for (const auto& x : lora_linear_modules()) {
    if (x == m) return true;
  }
  return false;
}

// "model.layers.<N>.<parent>.<module>" -> layer, module; false when it is anything else.
bool parse_linear_path(const std::string& path, int& layer, std::string& module) {
  const std::string prefix = kLayersPrefix;
  if (path.compare(0, prefix.size(), prefix) != 0) return false;
  std::size_t pos = prefix.size();
  const std::size_t dot = path.find('.', pos);
  if (dot == std::string::npos || dot == pos || dot - pos > 9) return false;
  for (std::size_t i = pos; i < dot; ++i) {
    if (path[i] < '0' || path[i] > '9') return false;
  }
  layer = std::stoi(path.substr(pos, dot - pos));
  const std::string rest = path.substr(dot + 1);  // "<parent>.<module>"
  const std::size_t dot2 = rest.find('.');
  if (dot2 == std::string::npos) return false;
  module = rest.substr(dot2 + 1);
  return is_linear_module(module) && rest.substr(0, dot2) == parent_of(module);
}

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The checks read and write share: the tensor adapts a targeted module, and the pair's shapes agree
// with r and with each other's data.
void check_factors(const std::string& where, const LoraAdapterConfig& config, const std::string& base_weight,
                   const LoraFactors& f) {
  int layer = 0;
  std::string module;
  if (!ends_with(base_weight, ".weight") ||
      !parse_linear_path(base_weight.substr(0, base_weight.size() - 7), layer, module)) {
    throw FormatError(where + ": '" + base_weight + "' is not the weight of a decoder linear module");
  }
  const std::string a_name = peft_lora_tensor_name(base_weight, LoraFactor::A);
  const std::string b_name = peft_lora_tensor_name(base_weight, LoraFactor::B);
  if (!config.targets(module)) {
    throw FormatError(where + ": tensor '" + a_name + "' adapts " + module +
                      ", which adapter_config.json's target_modules does not list");
  }
  const auto r = static_cast<std::int64_t>(config.r);
  if (f.A.shape.size() != 2 || f.A.shape[0] != r) {
    throw FormatError(where + ": tensor '" + a_name + "' has shape " + shape_str(f.A.shape) + "; expected [r = " +
                      std::to_string(r) + ", in_features]");
  }
  if (f.B.shape.size() != 2 || f.B.shape[1] != r) {
    throw FormatError(where + ": tensor '" + b_name + "' has shape " + shape_str(f.B.shape) +
                      "; expected [out_features, r = " + std::to_string(r) + "]");
  }
  if (f.A.data.size() != static_cast<std::size_t>(f.A.shape[0] * f.A.shape[1]) ||
      f.B.data.size() != static_cast<std::size_t>(f.B.shape[0] * f.B.shape[1])) {
    throw FormatError(where + ": tensors of '" + base_weight + "' hold a number of values other than their shape's");
  }
}

// A NaN or an infinity read from an adapter would merge into the weights, or make every forward
// non-finite: refused where the file is read.
void check_finite(const std::string& where, const std::string& base_weight, const LoraFactors& f) {
  for (const LoraFactor factor : {LoraFactor::A, LoraFactor::B}) {
    const TensorF32& t = factor == LoraFactor::A ? f.A : f.B;
    for (std::size_t i = 0; i < t.data.size(); ++i) {
      if (!std::isfinite(t.data[i])) {
        throw FormatError(where + ": tensor '" + peft_lora_tensor_name(base_weight, factor) + "' holds " +
                          std::to_string(t.data[i]) + " at element " + std::to_string(i) + ": an adapter must be finite");
      }
    }
  }
}

}  // namespace

std::string lora_base_weight_name(int layer, const std::string& module) {
  if (layer < 0 || !is_linear_module(module)) {
    throw FormatError("no decoder linear module '" + module + "' in layer " + std::to_string(layer) +
                      " can carry LoRA; modules: q_proj k_proj v_proj o_proj gate_proj up_proj down_proj");
  }
  return std::string(kLayersPrefix) + std::to_string(layer) + "." + parent_of(module) + "." + module + ".weight";
}

std::string peft_lora_tensor_name(const std::string& base_weight_name, LoraFactor factor) {
  int layer = 0;
  std::string module;
  if (!ends_with(base_weight_name, ".weight") ||
      !parse_linear_path(base_weight_name.substr(0, base_weight_name.size() - 7), layer, module)) {
    throw FormatError("'" + base_weight_name +
                      "' is not the weight of a decoder linear module (model.layers.<N>.self_attn.<q|k|v|o>_proj.weight "
                      "or model.layers.<N>.mlp.<gate|up|down>_proj.weight); it cannot carry LoRA");
  }
  const std::string module_path = base_weight_name.substr(0, base_weight_name.size() - 7);
  return kPeftPrefix + module_path + (factor == LoraFactor::A ? ".lora_A.weight" : ".lora_B.weight");
}

PeftLoraTensorName parse_peft_lora_tensor_name(const std::string& peft_name, const std::string& where) {
  const std::string expected =
      "expected base_model.model.model.layers.<N>.<self_attn|mlp>.<module>.lora_<A|B>.weight with <module> "
      "among q_proj k_proj v_proj o_proj gate_proj up_proj down_proj";
  const std::string prefix = kPeftPrefix;
  PeftLoraTensorName out;
  std::string tail;
  if (ends_with(peft_name, ".lora_A.weight")) {
    out.factor = LoraFactor::A;
    tail = ".lora_A.weight";
  } else if (ends_with(peft_name, ".lora_B.weight")) {
    out.factor = LoraFactor::B;
    tail = ".lora_B.weight";
  } else {
    throw FormatError(where + ": tensor '" + peft_name + "' is not a LoRA factor; " + expected);
  }
  if (peft_name.compare(0, prefix.size(), prefix) != 0 || peft_name.size() < prefix.size() + tail.size()) {
    throw FormatError(where + ": tensor '" + peft_name + "' does not start with '" + prefix + "'; " + expected);
  }
  const std::string path = peft_name.substr(prefix.size(), peft_name.size() - prefix.size() - tail.size());
  if (!parse_linear_path(path, out.layer, out.module)) {
    throw FormatError(where + ": tensor '" + peft_name + "' adapts '" + path +
                      "', which is not a decoder linear module; " + expected);
  }
  out.base_weight = path + ".weight";
  return out;
}

void write_peft_adapter(const std::string& dir, const LoraAdapterConfig& config, const LoraTensors& tensors) {
  namespace fs = std::filesystem;
  const std::string weights_path = (fs::path(dir) / kAdapterWeightsFile).string();
  if (tensors.empty()) throw FormatError(weights_path + ": no LoRA tensors to write");
  std::vector<NamedTensorRef> refs;
  for (const auto& [base_weight, f] : tensors) {
    check_factors(weights_path, config, base_weight, f);
    refs.push_back({peft_lora_tensor_name(base_weight, LoraFactor::A), f.A.shape, f.A.data.data()});
    refs.push_back({peft_lora_tensor_name(base_weight, LoraFactor::B), f.B.shape, f.B.data.data()});
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw FormatError("cannot create adapter directory '" + dir + "': " + ec.message());
  write_safetensors_f32(weights_path, refs);
  write_adapter_config_json((fs::path(dir) / kAdapterConfigFile).string(), config);
}

PeftAdapter read_peft_adapter(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string config_path = (fs::path(dir) / kAdapterConfigFile).string();
  const std::string weights_path = (fs::path(dir) / kAdapterWeightsFile).string();
  std::error_code ec;
  if (!fs::is_regular_file(config_path, ec) || !fs::is_regular_file(weights_path, ec)) {
    throw FormatError("'" + dir + "' is not a PEFT adapter directory: expected " + kAdapterConfigFile + " and " +
                      kAdapterWeightsFile + " (adapter_model.bin, PyTorch pickle, is not read)");
  }
  // In a shardft checkpoint the files are verified against the digests its sealed metadata.json holds,
  // whoever reads them (merge, generate, --adapter): a changed lora_alpha or value is refused.
  if (fs::is_regular_file((fs::path(dir) / "metadata.json").string(), ec)) verify_adapter_files(read_checkpoint_meta(dir));
  PeftAdapter adapter;
  adapter.config = read_adapter_config_json(config_path);
  std::map<std::string, TensorF32> raw = read_safetensors_f32(weights_path);
  if (raw.empty()) throw FormatError(weights_path + ": holds no tensors");
  std::map<std::string, std::set<LoraFactor>> seen;
  for (auto& [name, t] : raw) {
    const PeftLoraTensorName n = parse_peft_lora_tensor_name(name, weights_path);
    LoraFactors& f = adapter.tensors[n.base_weight];
    (n.factor == LoraFactor::A ? f.A : f.B) = std::move(t);
    seen[n.base_weight].insert(n.factor);
  }
  for (const auto& [base_weight, factors] : seen) {
    if (factors.size() != 2) {
      const LoraFactor missing = factors.count(LoraFactor::A) ? LoraFactor::B : LoraFactor::A;
      throw FormatError(weights_path + ": tensor '" + peft_lora_tensor_name(base_weight, missing) +
                        "' is missing (every lora_A needs its lora_B)");
    }
    check_factors(weights_path, adapter.config, base_weight, adapter.tensors[base_weight]);
    check_finite(weights_path, base_weight, adapter.tensors[base_weight]);
  }
  return adapter;
}

void check_peft_adapter_matches(const PeftAdapter& adapter,
                                const std::map<std::string, std::vector<std::int64_t>>& base_weight_shapes,
                                const std::string& where) {
  for (const auto& [base_weight, f] : adapter.tensors) {
    const auto it = base_weight_shapes.find(base_weight);
    if (it == base_weight_shapes.end()) {
      throw FormatError(where + ": the adapter adapts '" + base_weight + "', which the model does not have");
    }
    const std::vector<std::int64_t> want = {f.B.shape.at(0), f.A.shape.at(1)};
    if (it->second != want) {
      throw FormatError(where + ": the adapter of '" + base_weight + "' is for shape [out, in] = " +
                        shape_str(want) + "; the model's weight is " + shape_str(it->second));
    }
  }
  for (const auto& [name, shape] : base_weight_shapes) {
    int layer = 0;
    std::string module;
    if (!ends_with(name, ".weight") || !parse_linear_path(name.substr(0, name.size() - 7), layer, module)) continue;
    if (adapter.config.targets(module) && adapter.tensors.count(name) == 0) {
      throw FormatError(where + ": the adapter targets " + module + " but has no tensors for '" + name + "' (" +
                        peft_lora_tensor_name(name, LoraFactor::A) + ")");
    }
  }
}

void merge_lora_into(float* W, std::int64_t out, std::int64_t in, const float* A, const float* B, std::int64_t r,
                     double scale) {
  std::vector<double> row(static_cast<std::size_t>(in));
  for (std::int64_t o = 0; o < out; ++o) {
    // Row o of B·A, accumulated over k with i innermost so the loop runs over contiguous A rows.
    std::fill(row.begin(), row.end(), 0.0);
    for (std::int64_t k = 0; k < r; ++k) {
      const double b = B[o * r + k];
      const float* a = A + k * in;
      for (std::int64_t i = 0; i < in; ++i) row[static_cast<std::size_t>(i)] += b * static_cast<double>(a[i]);
    }
    float* w = W + o * in;
    for (std::int64_t i = 0; i < in; ++i) {
      w[i] = static_cast<float>(static_cast<double>(w[i]) + scale * row[static_cast<std::size_t>(i)]);
    }
  }
}

void merge_lora_into(TensorF32& W, const LoraFactors& f, double scale) {
  const auto& ws = W.shape;
  const auto& as = f.A.shape;
  const auto& bs = f.B.shape;
  if (ws.size() != 2 || as.size() != 2 || bs.size() != 2 || bs[0] != ws[0] || as[1] != ws[1] || bs[1] != as[0] ||
      W.data.size() != static_cast<std::size_t>(ws[0] * ws[1]) ||
      f.A.data.size() != static_cast<std::size_t>(as[0] * as[1]) ||
      f.B.data.size() != static_cast<std::size_t>(bs[0] * bs[1])) {
    throw FormatError("cannot merge LoRA factors A " + shape_str(as) + " and B " + shape_str(bs) + " into W " +
                      shape_str(ws) + ": expected A [r, in], B [out, r], W [out, in]");
  }
  merge_lora_into(W.data.data(), ws[0], ws[1], f.A.data.data(), f.B.data.data(), as[0], scale);
}

}  // namespace shardft
