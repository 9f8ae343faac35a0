// io/lora_adapter_config + io/peft_adapter: PEFT adapter_config.json keys and the ones refused, the
// tensor name mapping both ways, write -> read bit-exact, the checks a read makes (pairs, ranks, stray
// tensors, widening of bf16 / fp16 files), the check against a model's shapes, and the merge arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "io/peft_adapter.hpp"
#include "kernels/bf16.hpp"

namespace shardft {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "peft_adapter_" + name;
  fs::remove_all(d);
  return d;
}

// The message of the FormatError f throws ("" when it throws none).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

LoraAdapterConfig qv_config() {
  LoraAdapterConfig c;
  c.r = 4;
  c.lora_alpha = 8;
  c.lora_dropout = 0.05;
  c.target_modules = {"q_proj", "down_proj"};
  c.base_model_name_or_path = "tests/reference/hf/tiny_llama";
  return c;
}

TensorF32 random_tensor(std::vector<std::int64_t> shape, std::mt19937& rng) {
  TensorF32 t;
  t.shape = shape;
  std::normal_distribution<float> dist(0.f, 0.3f);
  t.data.resize(static_cast<std::size_t>(shape[0] * shape[1]));
  for (auto& v : t.data) v = dist(rng);
  return t;
}

// Two layers of q_proj [32 <- 32] and down_proj [32 <- 80], r = 4 (tiny_llama's shapes).
LoraTensors qv_tensors(int r = 4) {
  std::mt19937 rng(7);
  LoraTensors t;
  for (int layer = 0; layer < 2; ++layer) {
    t[lora_base_weight_name(layer, "q_proj")] = {random_tensor({r, 32}, rng), random_tensor({32, r}, rng)};
    t[lora_base_weight_name(layer, "down_proj")] = {random_tensor({r, 80}, rng), random_tensor({32, r}, rng)};
  }
  return t;
}

TEST(LoraTargetModules, AllLinearIsEveryDecoderLinearButNotTheHead) {
  const std::vector<std::string> all = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  EXPECT_EQ(lora_target_modules("all-linear", "w"), all);
  EXPECT_EQ(lora_linear_modules(), all);
}

TEST(LoraTargetModules, ExplicitNamesAreDeduplicatedInLayerOrder) {
  EXPECT_EQ(lora_target_modules(std::vector<std::string>{"v_proj", "q_proj", "v_proj"}, "w"),
            (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(lora_target_modules(" down_proj, q_proj", "w"), (std::vector<std::string>{"q_proj", "down_proj"}));
  EXPECT_EQ(lora_target_modules("o_proj", "w"), (std::vector<std::string>{"o_proj"}));
}

TEST(LoraTargetModules, UnknownOrEmptyNameIsAnErrorListingTheValidOnes) {
  const std::string e = error_of([] { lora_target_modules("q_proj,lm_head", "recipe key lora_target_modules"); });
  EXPECT_NE(e.find("recipe key lora_target_modules"), std::string::npos) << e;
  EXPECT_NE(e.find("'lm_head'"), std::string::npos) << e;
  EXPECT_NE(e.find("all-linear"), std::string::npos) << e;
  for (const auto& m : lora_linear_modules()) EXPECT_NE(e.find(m), std::string::npos) << m << ": " << e;
  EXPECT_NE(error_of([] { lora_target_modules("q_proj,,v_proj", "w"); }).find("empty module name"), std::string::npos);
  EXPECT_NE(error_of([] { lora_target_modules(std::vector<std::string>{}, "w"); }).find("no target module"),
            std::string::npos);
}

TEST(LoraAdapterConfig, ScaleIsAlphaOverROrOverSqrtRWithRsLora) {
  LoraAdapterConfig c;
  c.r = 8;
  c.lora_alpha = 16;
  EXPECT_DOUBLE_EQ(c.scale(), 2.0);
  c.r = 4;
  c.lora_alpha = 8;
  c.use_rslora = true;
  EXPECT_DOUBLE_EQ(c.scale(), 4.0);  // 8 / sqrt(4)
}

TEST(LoraAdapterConfig, JsonHasEveryKeyPeft013WritesAndReadsBack) {
  const LoraAdapterConfig c = qv_config();
  const nlohmann::json j = nlohmann::json::parse(adapter_config_to_json(c));
  // The keys of PEFT 0.13.2's LoraConfig.save_pretrained (checked against its output for tiny_llama).
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "alpha_pattern", "auto_mapping", "base_model_name_or_path", "bias", "fan_in_fan_out",
                      "inference_mode", "init_lora_weights", "layer_replication", "layers_pattern",
                      "layers_to_transform", "loftq_config", "lora_alpha", "lora_dropout", "megatron_config",
                      "megatron_core", "modules_to_save", "peft_type", "r", "rank_pattern", "revision",
                      "target_modules", "task_type", "use_dora", "use_rslora"}));
  EXPECT_EQ(j["peft_type"], "LORA");
  EXPECT_EQ(j["task_type"], "CAUSAL_LM");
  EXPECT_EQ(j["r"], 4);
  EXPECT_TRUE(j["lora_alpha"].is_number_integer());  // as PEFT writes LoraConfig(lora_alpha=8)
  EXPECT_EQ(j["lora_alpha"], 8);
  EXPECT_EQ(j["bias"], "none");
  EXPECT_EQ(j["target_modules"], nlohmann::json({"q_proj", "down_proj"}));

  for (double alpha : {8.0, 12.5}) {
    LoraAdapterConfig in = c;
    in.lora_alpha = alpha;
    in.use_rslora = alpha != 8.0;
    const LoraAdapterConfig back = adapter_config_from_json(adapter_config_to_json(in), "x.json");
    EXPECT_EQ(back.r, in.r);
    EXPECT_EQ(back.lora_alpha, in.lora_alpha);
    EXPECT_EQ(back.lora_dropout, in.lora_dropout);
    EXPECT_EQ(back.target_modules, in.target_modules);
    EXPECT_EQ(back.use_rslora, in.use_rslora);
    EXPECT_EQ(back.base_model_name_or_path, in.base_model_name_or_path);
    EXPECT_EQ(back.scale(), in.scale());
  }
}

TEST(LoraAdapterConfig, HarmlessAndLaterPeftKeysAreAccepted) {
  nlohmann::json j = nlohmann::json::parse(adapter_config_to_json(qv_config()));
  j["peft_version"] = "0.19.1";
  j["lora_bias"] = false;
  j["exclude_modules"] = nullptr;
  j["init_lora_weights"] = "gaussian";
  j["inference_mode"] = false;
  j["revision"] = "main";
  j["layers_pattern"] = "layers";
  j["task_type"] = nullptr;
  j["target_modules"] = "all-linear";
  const LoraAdapterConfig c = adapter_config_from_json(j.dump(), "x.json");
  EXPECT_EQ(c.target_modules, lora_linear_modules());
  EXPECT_EQ(c.r, 4);
}

struct Rejection {
  const char* key;
  nlohmann::json value;
  const char* supported;  // a phrase of the message saying what is supported
};

TEST(LoraAdapterConfig, KeysThisBuildCannotHonourAreErrorsNamingFileKeyAndWhatIsSupported) {
  const std::vector<Rejection> cases = {
      {"peft_type", "IA3", "LoRA adapters only"},
      {"task_type", "SEQ_CLS", "CAUSAL_LM"},
      {"use_dora", true, "use_dora false"},
      {"bias", "lora_only", "bias \"none\" only"},
      {"lora_bias", true, "lora_bias false"},
      {"fan_in_fan_out", true, "fan_in_fan_out false"},
      {"modules_to_save", {"lm_head"}, "modules_to_save null"},
      {"layers_to_transform", {0, 1}, "layers_to_transform null"},
      {"layers_to_transform", 0, "layers_to_transform null"},
      {"layer_replication", {{0, 2}}, "layer_replication null"},
      {"rank_pattern", {{"q_proj", 16}}, "rank_pattern {}"},
      {"alpha_pattern", {{"q_proj", 32}}, "alpha_pattern {}"},
      {"exclude_modules", {"q_proj"}, "exclude_modules null"},
      {"use_qalora", true, "use_qalora false"},
      {"r", 0, "positive integer"},
      {"r", 8.5, "positive integer"},
      {"lora_alpha", "16", "a finite, non-zero number"},
      {"lora_alpha", 0, "a finite, non-zero number"},
      {"lora_dropout", 1.0, "[0, 1)"},
      {"target_modules", ".*q_proj", "regular-expression"},
      {"target_modules", nullptr, "list of module names"},
  };
  for (const auto& rc : cases) {
    nlohmann::json j = nlohmann::json::parse(adapter_config_to_json(qv_config()));
    j[rc.key] = rc.value;
    const std::string e = error_of([&] { adapter_config_from_json(j.dump(), "dir/adapter_config.json"); });
    EXPECT_EQ(e.rfind("dir/adapter_config.json: ", 0), 0u) << rc.key << " " << rc.value.dump() << ": " << e;
    EXPECT_NE(e.find(std::string("'") + rc.key + "'"), std::string::npos) << e;
    EXPECT_NE(e.find(rc.supported), std::string::npos) << e;
  }
  nlohmann::json j = nlohmann::json::parse(adapter_config_to_json(qv_config()));
  j["target_modules"] = {"q_proj", "lm_head"};
  const std::string e = error_of([&] { adapter_config_from_json(j.dump(), "a.json"); });
  EXPECT_NE(e.find("a.json: key 'target_modules': 'lm_head' is not a linear module"), std::string::npos) << e;
  j.erase("peft_type");
  EXPECT_NE(error_of([&] { adapter_config_from_json(j.dump(), "a.json"); }).find("missing key 'peft_type'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { adapter_config_from_json("{\"r\": 8,", "a.json"); }).find("a.json: not valid JSON"),
            std::string::npos);
}

TEST(PeftTensorNames, MapBothWaysForEveryModule) {
  EXPECT_EQ(peft_lora_tensor_name("model.layers.3.self_attn.q_proj.weight", LoraFactor::A),
            "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(peft_lora_tensor_name("model.layers.0.mlp.gate_proj.weight", LoraFactor::B),
            "base_model.model.model.layers.0.mlp.gate_proj.lora_B.weight");
  EXPECT_EQ(lora_base_weight_name(12, "down_proj"), "model.layers.12.mlp.down_proj.weight");
  EXPECT_EQ(lora_base_weight_name(1, "v_proj"), "model.layers.1.self_attn.v_proj.weight");
  for (int layer : {0, 7, 123}) {
    for (const auto& m : lora_linear_modules()) {
      for (LoraFactor f : {LoraFactor::A, LoraFactor::B}) {
        const std::string base = lora_base_weight_name(layer, m);
        const PeftLoraTensorName n = parse_peft_lora_tensor_name(peft_lora_tensor_name(base, f), "file");
        EXPECT_EQ(n.base_weight, base);
        EXPECT_EQ(n.factor, f);
        EXPECT_EQ(n.layer, layer);
        EXPECT_EQ(n.module, m);
      }
    }
  }
}

TEST(PeftTensorNames, NamesThatAreNotLoraFactorsOfDecoderLinearsAreRejected) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"model.layers.0.self_attn.q_proj.weight", "is not a LoRA factor"},
      {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight", "is not a LoRA factor"},
      {"base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector", "is not a LoRA factor"},
      {"base_model.model.model.embed_tokens.lora_embedding_A", "is not a LoRA factor"},
      {"model.layers.0.self_attn.q_proj.lora_A.weight", "does not start with 'base_model.model.'"},
      {"base_model.model.lm_head.lora_A.weight", "'lm_head', which is not a decoder linear module"},
      {"base_model.model.model.layers.x.self_attn.q_proj.lora_B.weight", "not a decoder linear module"},
      {"base_model.model.model.layers.0.mlp.q_proj.lora_A.weight", "not a decoder linear module"},
      {"base_model.model.model.layers.0.self_attn.qkv_proj.lora_A.weight", "not a decoder linear module"},
  };
  for (const auto& [name, why] : bad) {
    const std::string e = error_of([&] { parse_peft_lora_tensor_name(name, "a/adapter_model.safetensors"); });
    EXPECT_EQ(e.rfind("a/adapter_model.safetensors: tensor '" + name + "'", 0), 0u) << e;
    EXPECT_NE(e.find(why), std::string::npos) << e;
  }
  for (const std::string base : {"lm_head.weight", "model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.bias",
                                 "model.layers.0.input_layernorm.weight"}) {
    const std::string e = error_of([&] { peft_lora_tensor_name(base, LoraFactor::A); });
    EXPECT_NE(e.find("'" + base + "' is not the weight of a decoder linear module"), std::string::npos) << e;
  }
  EXPECT_NE(error_of([] { lora_base_weight_name(0, "lm_head"); }).find("'lm_head'"), std::string::npos);
  EXPECT_NE(error_of([] { lora_base_weight_name(-1, "q_proj"); }).find("layer -1"), std::string::npos);
}

TEST(PeftAdapterFiles, WriteThenReadIsBitExact) {
  const std::string dir = fresh_dir("roundtrip") + "/nested";  // created by the writer
  LoraTensors t = qv_tensors();
  // Values whose bits a lossy path would change: a subnormal, -0, the largest float, the smallest normal.
  auto& a = t.begin()->second.A.data;
  a[0] = std::numeric_limits<float>::denorm_min();
  a[1] = -0.f;
  a[2] = std::numeric_limits<float>::max();
  a[3] = -std::numeric_limits<float>::min();
  write_peft_adapter(dir, qv_config(), t);
  EXPECT_TRUE(fs::is_regular_file(dir + "/adapter_config.json"));
  EXPECT_TRUE(fs::is_regular_file(dir + "/adapter_model.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/adapter_config.json.tmp"));
  EXPECT_FALSE(fs::exists(dir + "/adapter_model.safetensors.tmp"));

  const PeftAdapter back = read_peft_adapter(dir);
  EXPECT_EQ(back.config.r, 4);
  EXPECT_EQ(back.config.target_modules, qv_config().target_modules);
  EXPECT_EQ(back.config.lora_dropout, 0.05);
  ASSERT_EQ(back.tensors.size(), t.size());
  for (const auto& [name, f] : t) {
    ASSERT_EQ(back.tensors.count(name), 1u) << name;
    const LoraFactors& g = back.tensors.at(name);
    EXPECT_EQ(g.A.shape, f.A.shape) << name;
    EXPECT_EQ(g.B.shape, f.B.shape) << name;
    ASSERT_EQ(g.A.data.size(), f.A.data.size());
    ASSERT_EQ(g.B.data.size(), f.B.data.size());
    EXPECT_EQ(std::memcmp(g.A.data.data(), f.A.data.data(), 4 * f.A.data.size()), 0) << name;
    EXPECT_EQ(std::memcmp(g.B.data.data(), f.B.data.data(), 4 * f.B.data.size()), 0) << name;
  }
  // The file holds PEFT's names, so PeftModel.from_pretrained finds them.
  const auto raw = read_safetensors_f32(dir + "/adapter_model.safetensors");
  EXPECT_EQ(raw.count("base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"), 1u);
  EXPECT_EQ(raw.size(), 8u);
}

// Writes adapter_config.json for qv_config() and the given tensors under the given names, bypassing the
// checks of write_peft_adapter.
std::string write_raw_adapter(const std::string& name, const std::vector<NamedTensorRef>& tensors) {
  const std::string dir = fresh_dir(name);
  fs::create_directories(dir);
  write_adapter_config_json(dir + "/adapter_config.json", qv_config());
  write_safetensors_f32(dir + "/adapter_model.safetensors", tensors);
  return dir;
}

TEST(PeftAdapterFiles, ReadRejectsUnpairedMisshapenStrayAndUntargetedTensors) {
  const std::vector<float> buf(32 * 80, 0.5f);
  const std::string qA = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight";
  const std::string qB = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight";
  struct Case {
    std::string name;
    std::vector<NamedTensorRef> tensors;
    std::string message;
  };
  std::vector<float> with_nan = buf, with_inf = buf;
  with_nan[7] = std::numeric_limits<float>::quiet_NaN();
  with_inf[31] = -std::numeric_limits<float>::infinity();
  const std::vector<Case> cases = {
      {"missing_b", {{qA, {4, 32}, buf.data()}}, "tensor '" + qB + "' is missing"},
      {"nan_a", {{qA, {4, 32}, with_nan.data()}, {qB, {32, 4}, buf.data()}},
       "tensor '" + qA + "' holds nan at element 7: an adapter must be finite"},
      {"inf_b", {{qA, {4, 32}, buf.data()}, {qB, {32, 4}, with_inf.data()}},
       "tensor '" + qB + "' holds -inf at element 31: an adapter must be finite"},
      {"missing_a", {{qB, {32, 4}, buf.data()}}, "tensor '" + qA + "' is missing"},
      {"a_rank", {{qA, {8, 32}, buf.data()}, {qB, {32, 4}, buf.data()}},
       "tensor '" + qA + "' has shape [8, 32]; expected [r = 4, in_features]"},
      {"b_rank", {{qA, {4, 32}, buf.data()}, {qB, {32, 8}, buf.data()}},
       "tensor '" + qB + "' has shape [32, 8]; expected [out_features, r = 4]"},
      {"a_1d", {{qA, {128}, buf.data()}, {qB, {32, 4}, buf.data()}}, "tensor '" + qA + "' has shape [128]"},
      {"stray", {{qA, {4, 32}, buf.data()}, {qB, {32, 4}, buf.data()}, {"lm_head.weight", {4, 4}, buf.data()}},
       "tensor 'lm_head.weight' is not a LoRA factor"},
      {"untargeted",
       {{"base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight", {4, 32}, buf.data()},
        {"base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight", {8, 4}, buf.data()}},
       "adapts v_proj, which adapter_config.json's target_modules does not list"},
  };
  for (const auto& c : cases) {
    const std::string dir = write_raw_adapter(c.name, c.tensors);
    const std::string e = error_of([&] { read_peft_adapter(dir); });
    EXPECT_EQ(e.rfind(dir + "/adapter_model.safetensors: ", 0), 0u) << c.name << ": " << e;
    EXPECT_NE(e.find(c.message), std::string::npos) << c.name << ": " << e;
  }
  const std::string empty_dir = fresh_dir("no_files");
  fs::create_directories(empty_dir);
  EXPECT_NE(error_of([&] { read_peft_adapter(empty_dir); }).find("is not a PEFT adapter directory"),
            std::string::npos);
}

TEST(PeftAdapterFiles, Bf16AndFp16AdaptersAreWidenedToFp32) {
  LoraTensors t = qv_tensors();
  for (auto& [name, f] : t) {  // values both formats hold exactly
    for (auto* v : {&f.A.data, &f.B.data}) {
      for (auto& x : *v) x = std::ldexp(std::round(std::ldexp(x, 6)), -6);
    }
  }
  for (TensorDtype dt : {TensorDtype::BF16, TensorDtype::F16}) {
    const std::string dir = fresh_dir(std::string("half_") + dtype_tag(dt));
    fs::create_directories(dir);
    write_adapter_config_json(dir + "/adapter_config.json", qv_config());
    std::vector<TensorEntry> entries;
    std::vector<const float*> data;
    for (const auto& [name, f] : t) {
      entries.push_back({peft_lora_tensor_name(name, LoraFactor::A), f.A.shape});
      data.push_back(f.A.data.data());
      entries.push_back({peft_lora_tensor_name(name, LoraFactor::B), f.B.shape});
      data.push_back(f.B.data.data());
    }
    SafetensorsStreamWriter w(dir + "/adapter_model.safetensors", entries, dt);
    for (const float* d : data) w.write_next(d);
    w.finish();
    const PeftAdapter back = read_peft_adapter(dir);
    for (const auto& [name, f] : t) {
      EXPECT_EQ(back.tensors.at(name).A.data, f.A.data) << dtype_tag(dt) << " " << name;
      EXPECT_EQ(back.tensors.at(name).B.data, f.B.data) << dtype_tag(dt) << " " << name;
    }
  }
}

TEST(PeftAdapterFiles, WriteChecksTheTensorsBeforeWritingAnything) {
  const std::string dir = fresh_dir("bad_write");
  LoraTensors t = qv_tensors(/*r=*/8);  // config says r = 4
  const std::string e = error_of([&] { write_peft_adapter(dir, qv_config(), t); });
  EXPECT_NE(e.find("base_model.model.model.layers.0.mlp.down_proj.lora_A.weight' has shape [8, 80]"),
            std::string::npos)
      << e;
  EXPECT_FALSE(fs::exists(dir));
  LoraTensors lm;
  lm["lm_head.weight"] = qv_tensors().begin()->second;
  EXPECT_NE(error_of([&] { write_peft_adapter(dir, qv_config(), lm); })
                .find("'lm_head.weight' is not the weight of a decoder linear module"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir));
}

TEST(PeftAdapterFiles, CheckAgainstTheModelFindsMissingLayersAndWrongShapes) {
  PeftAdapter adapter{qv_config(), qv_tensors()};
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (int layer = 0; layer < 2; ++layer) {
    for (const auto& m : lora_linear_modules()) {
      const bool mlp_in = m == "down_proj";
      const bool mlp_out = m == "gate_proj" || m == "up_proj";
      shapes[lora_base_weight_name(layer, m)] = {mlp_out ? 80 : 32, mlp_in ? 80 : 32};
    }
  }
  shapes["lm_head.weight"] = {1664, 32};
  EXPECT_NO_THROW(check_peft_adapter_matches(adapter, shapes, "adapter"));

  auto wrong = shapes;
  wrong["model.layers.1.mlp.down_proj.weight"] = {32, 64};
  EXPECT_NE(error_of([&] { check_peft_adapter_matches(adapter, wrong, "adapter"); })
                .find("'model.layers.1.mlp.down_proj.weight' is for shape [out, in] = [32, 80]; the model's "
                      "weight is [32, 64]"),
            std::string::npos);
  auto deeper = shapes;
  deeper["model.layers.2.self_attn.q_proj.weight"] = {32, 32};
  EXPECT_NE(error_of([&] { check_peft_adapter_matches(adapter, deeper, "adapter"); })
                .find("has no tensors for 'model.layers.2.self_attn.q_proj.weight'"),
            std::string::npos);
  auto shallower = shapes;
  shallower.erase("model.layers.1.self_attn.q_proj.weight");
  EXPECT_NE(error_of([&] { check_peft_adapter_matches(adapter, shallower, "adapter"); })
                .find("adapts 'model.layers.1.self_attn.q_proj.weight', which the model does not have"),
            std::string::npos);
}

TEST(LoraMerge, MatchesAHandComputation) {
  // W [2, 3], A [r = 2, 3], B [2, 2], scale 0.5.
  // B·A = [[1·1 + 0·4, 1·2 + 0·5, 1·3 + 0·6], [2·1 - 1·4, 2·2 - 1·5, 2·3 - 1·6]] = [[1, 2, 3], [-2, -1, 0]]
  // W + 0.5 · B·A = [[10.5, 21, 31.5], [39, 49.5, 60]]
  TensorF32 W{{2, 3}, {10, 20, 30, 40, 50, 60}};
  const LoraFactors f{{{2, 3}, {1, 2, 3, 4, 5, 6}}, {{2, 2}, {1, 0, 2, -1}}};
  merge_lora_into(W, f, 0.5);
  EXPECT_EQ(W.data, (std::vector<float>{10.5f, 21.f, 31.5f, 39.f, 49.5f, 60.f}));
}

TEST(LoraMerge, SumsTheRankInDouble) {
  // One element, r = 3: 1e8·1 + 1·1 - 1e8·1. In float, 1e8 + 1 rounds back to 1e8 and the sum is 0;
  // in double it is 1.
  float W = 0.f;
  const float A[3] = {1.f, 1.f, 1.f};
  const float B[3] = {1e8f, 1.f, -1e8f};
  merge_lora_into(&W, 1, 1, A, B, 3, 1.0);
  EXPECT_EQ(W, 1.f);
}

TEST(LoraMerge, MismatchedShapesAreRejected) {
  TensorF32 W{{2, 3}, std::vector<float>(6, 0.f)};
  const LoraFactors f{{{2, 4}, std::vector<float>(8, 0.f)}, {{2, 2}, std::vector<float>(4, 0.f)}};
  EXPECT_NE(error_of([&] { merge_lora_into(W, f, 1.0); }).find("A [2, 4] and B [2, 2] into W [2, 3]"),
            std::string::npos);
}

}  // namespace
}  // namespace shardft
