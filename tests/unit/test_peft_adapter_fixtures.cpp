// read_peft_adapter on adapters PEFT 0.13.2 saved (tests/reference/peft/<case>/adapter_init and
// adapter_after, made by tests/reference/make_peft_fixtures.py): the config equals the case's
// expected.json, every layer's A and B have the shapes the base model's config.json implies, the values
// are the file's under PEFT's names, and the adapter matches the base model's weights.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "io/hf_weights.hpp"
#include "io/peft_adapter.hpp"

namespace shardft {
namespace {

const std::string kPeftDir = std::string(SHARDFT_REFERENCE_DIR) + "/peft/";

nlohmann::json load_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(in);
}

// [out, in] of each decoder linear, from the HF config.json alone.
std::map<std::string, std::vector<std::int64_t>> linear_shapes(const nlohmann::json& hf) {
  const std::int64_t d = hf["hidden_size"], I = hf["intermediate_size"], heads = hf["num_attention_heads"];
  const std::int64_t kv = hf.value("num_key_value_heads", heads);
  const std::int64_t hd = hf.contains("head_dim") && !hf["head_dim"].is_null() ? hf["head_dim"].get<std::int64_t>()
                                                                                : d / heads;
  return {{"q_proj", {heads * hd, d}}, {"k_proj", {kv * hd, d}}, {"v_proj", {kv * hd, d}},
          {"o_proj", {d, heads * hd}}, {"gate_proj", {I, d}},    {"up_proj", {I, d}},
          {"down_proj", {d, I}}};
}

class PeftFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(PeftFixture, AdaptersPeftSavedReadWithTheirConfigAndEveryLayersShapes) {
  const std::string dir = kPeftDir + GetParam();
  const nlohmann::json expected = load_json(dir + "/expected.json");
  const std::string base_dir = std::string(SHARDFT_REFERENCE_DIR) + "/" + expected["base"].get<std::string>();
  const nlohmann::json hf = load_json(base_dir + "/config.json");
  const auto shapes = linear_shapes(hf);
  const int layers = hf["num_hidden_layers"];
  const nlohmann::json& lora = expected["lora"];
  const std::vector<std::string> targets =
      lora["target_modules"].is_string()
          ? lora_target_modules(lora["target_modules"].get<std::string>(), "expected.json")
          : lora_target_modules(lora["target_modules"].get<std::vector<std::string>>(), "expected.json");

  HfModelWeights base(base_dir);
  std::map<std::string, std::vector<std::int64_t>> base_shapes;
  for (const auto& name : base.names()) base_shapes[name] = base.shape(name);

  for (const char* which : {"adapter_init", "adapter_after"}) {
    SCOPED_TRACE(std::string(GetParam()) + "/" + which);
    const PeftAdapter a = read_peft_adapter(dir + "/" + which);
    EXPECT_EQ(a.config.r, lora["r"].get<int>());
    EXPECT_EQ(a.config.lora_alpha, lora["lora_alpha"].get<double>());
    EXPECT_EQ(a.config.lora_dropout, lora["lora_dropout"].get<double>());
    EXPECT_EQ(a.config.use_rslora, lora["use_rslora"].get<bool>());
    EXPECT_EQ(a.config.target_modules, targets);
    EXPECT_DOUBLE_EQ(a.config.scale(), expected["scale"].get<double>());

    ASSERT_EQ(a.tensors.size(), static_cast<std::size_t>(layers) * targets.size());
    const std::int64_t r = a.config.r;
    for (int layer = 0; layer < layers; ++layer) {
      for (const auto& m : targets) {
        const std::string w = lora_base_weight_name(layer, m);
        ASSERT_EQ(a.tensors.count(w), 1u) << w;
        const auto& out_in = shapes.at(m);
        EXPECT_EQ(a.tensors.at(w).A.shape, (std::vector<std::int64_t>{r, out_in[1]})) << w;
        EXPECT_EQ(a.tensors.at(w).B.shape, (std::vector<std::int64_t>{out_in[0], r})) << w;
      }
    }
    EXPECT_NO_THROW(check_peft_adapter_matches(a, base_shapes, dir));

    // The values are the file's, each under the PEFT name of the weight it is filed under.
    const auto raw = read_safetensors_f32(dir + "/" + which + "/adapter_model.safetensors");
    for (const auto& [w, f] : a.tensors) {
      EXPECT_EQ(f.A.data, raw.at(peft_lora_tensor_name(w, LoraFactor::A)).data) << w;
      EXPECT_EQ(f.B.data, raw.at(peft_lora_tensor_name(w, LoraFactor::B)).data) << w;
    }
  }
  // The step-1 gradients are filed under the same names.
  for (const auto& [name, t] : read_safetensors_f32(dir + "/grads_step1.safetensors")) {
    EXPECT_NO_THROW(parse_peft_lora_tensor_name(name, "grads_step1.safetensors")) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, PeftFixture,
                         ::testing::Values("llama_all_linear", "llama_rslora_qv", "qwen2_all_linear",
                                           "llama_peft_init"));

TEST(PeftFixtureInit, PeftsOwnInitialisationHasBZeroAndANonZero) {
  const PeftAdapter a = read_peft_adapter(kPeftDir + "llama_peft_init/adapter_init");
  for (const auto& [w, f] : a.tensors) {
    bool a_nonzero = false;
    for (float v : f.A.data) a_nonzero |= v != 0.f;
    EXPECT_TRUE(a_nonzero) << w;
    for (float v : f.B.data) ASSERT_EQ(v, 0.f) << w;
  }
}

}  // namespace
}  // namespace shardft
