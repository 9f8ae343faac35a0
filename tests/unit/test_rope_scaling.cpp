// RoPE scaling (config.json's rope_scaling) against transformers itself: tests/reference/rope_scaling.json,
// written by tests/reference/make_rope_scaling.py from LlamaRotaryEmbedding, holds its inv_freq, attention
// scaling and cos / sin for llama3, linear, dynamic (within and beyond the context) and yarn, and the loss
// of a tiny Llama with llama3 scaling (hf/tiny_llama_rope_llama3).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "comm/self_communicator.hpp"
#include "config/rope_scaling_json.hpp"
#include "config/train_config.hpp"
#include "finite_difference.hpp"
#include "model/decoder.hpp"
#include "model/decoder_cache.hpp"
#include "model/rope_frequencies.hpp"
#include "tests/common/hf_fixture_batch.hpp"
#include "infer/hf_export.hpp"
#include "train/trainer.hpp"

namespace shardft {
namespace {

using kernel_test::sci;
using kernel_test::to_device;
using kernel_test::to_host;

const nlohmann::json& fixture() {
  static const nlohmann::json j =
      nlohmann::json::parse(std::ifstream(std::string(SHARDFT_REFERENCE_DIR) + "/rope_scaling.json"));
  return j;
}

ModelConfig config_of(const nlohmann::json& c) {
  ModelConfig m;
  m.hidden_size = c.at("hidden_size");
  m.num_attention_heads = c.at("num_attention_heads");
  m.rope_theta = c.at("rope_theta");
  m.max_position_embeddings = c.at("max_position_embeddings");
  m.rope_scaling = parse_rope_scaling(c.at("rope_scaling"), "");
  return m;
}

// transformers computes the angle p * inv_freq in float32: its cos / sin carry an error up to about
// p * inv_freq * 2^-24 that shardft's double angles do not.
double cos_sin_tolerance(std::int64_t p, double inv_freq) { return 1e-6 + 1.2e-7 * static_cast<double>(p) * inv_freq; }

// cos / sin as rope_rotate_qk applies them: the pair (1, 0) rotates to (cos, sin), both scaled.
std::pair<std::vector<float>, std::vector<float>> rotated_unit(const RopeTable& table, const std::vector<std::int32_t>& pos) {
  const int hd = table.head_dim, half = hd / 2, n = static_cast<int>(pos.size());
  std::vector<float> x(static_cast<std::size_t>(n) * hd, 0.f);
  for (int t = 0; t < n; ++t) std::fill_n(x.begin() + static_cast<std::ptrdiff_t>(t) * hd, half, 1.f);
  auto q = to_device(x, n, hd, "q"), k = to_device(x, n, hd, "k");
  rope_rotate_qk(q, k, to_device(pos, "pos"), table, false);
  const std::vector<float> out = to_host(q);
  std::vector<float> c, s;
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < half; ++i) {
      c.push_back(out[static_cast<std::size_t>(t) * hd + i]);
      s.push_back(out[static_cast<std::size_t>(t) * hd + half + i]);
    }
  }
  return {c, s};
}

TEST(RopeScaling, FrequenciesAndCosSinMatchTransformers) {
  ASSERT_GE(fixture().at("cases").size(), 7u);
  for (const auto& cs : fixture().at("cases")) {
    const std::string name = cs.at("name");
    const ModelConfig m = config_of(cs.at("config"));
    const std::int64_t seq_len = cs.at("seq_len");
    const auto want_f = cs.at("inv_freq").get<std::vector<double>>();
    const std::vector<double> f = rope_inv_freq(m, seq_len);
    ASSERT_EQ(f.size(), want_f.size()) << name;
    double worst_f = 0;
    for (std::size_t i = 0; i < f.size(); ++i) worst_f = std::max(worst_f, std::abs(f[i] - want_f[i]) / want_f[i]);
    EXPECT_LT(worst_f, 1e-6) << name;  // transformers' inv_freq is float32
    ::testing::Test::RecordProperty(name + "_inv_freq_rel_err", sci(worst_f));
    EXPECT_NEAR(rope_attention_scaling(m), cs.at("attention_scaling").get<double>(), 1e-6) << name;

    const auto pos = cs.at("positions").get<std::vector<std::int32_t>>();
    const auto want_c = cs.at("cos").get<std::vector<std::vector<double>>>();
    const auto want_s = cs.at("sin").get<std::vector<std::vector<double>>>();
    // The table path (every position inside it) and the fallback path (a one-row table).
    for (const std::int64_t rows : {seq_len, std::int64_t{1}}) {
      const RopeTable table = make_model_rope_table(m, rows, seq_len);
      const auto [c, s] = rotated_unit(table, pos);
      double worst = 0, worst_abs = 0;
      for (std::size_t t = 0; t < pos.size(); ++t) {
        for (std::size_t i = 0; i < f.size(); ++i) {
          const double tol = cos_sin_tolerance(pos[t], f[i]);
          const std::size_t at = t * f.size() + i;
          const double err = std::max(std::abs(c[at] - want_c[t][i]), std::abs(s[at] - want_s[t][i]));
          worst = std::max(worst, err / tol);
          worst_abs = std::max(worst_abs, err);
          ASSERT_NEAR(c[at], want_c[t][i], tol) << name << " cos p=" << pos[t] << " i=" << i << " rows " << rows;
          ASSERT_NEAR(s[at], want_s[t][i], tol) << name << " sin p=" << pos[t] << " i=" << i << " rows " << rows;
        }
      }
      const std::string path = name + (rows == 1 ? "_fallback" : "_table");
      ::testing::Test::RecordProperty(path + "_err_over_tol", sci(worst));
      ::testing::Test::RecordProperty(path + "_max_abs_err", sci(worst_abs));
    }
  }
}

TEST(RopeScaling, DynamicIsPlainWithinTheContextAndRescaledBeyond) {
  ModelConfig m;
  m.max_position_embeddings = 64;
  m.rope_scaling = parse_rope_scaling({{"rope_type", "dynamic"}, {"factor", 2.0}}, "");
  const std::vector<double> plain = plain_rope_inv_freq(m.head_dim(), m.rope_theta);
  EXPECT_EQ(rope_inv_freq(m, 10), plain);
  EXPECT_EQ(rope_inv_freq(m, 64), plain);
  EXPECT_LT(rope_inv_freq(m, 65)[1], plain[1]);
  EXPECT_EQ(rope_frequency_length(m, 10), 64);
  EXPECT_EQ(rope_frequency_length(m, 100), 100);
  m.rope_scaling = parse_rope_scaling({{"rope_type", "linear"}, {"factor", 2.0}}, "");
  EXPECT_EQ(rope_frequency_length(m, 100), 0);
}

TEST(RopeScaling, YarnMscaleAndOriginalContext) {
  ModelConfig m;
  m.hidden_size = 64;
  m.num_attention_heads = 4;
  m.max_position_embeddings = 256;
  // DeepSeek-style: the attention factor is the ratio of two mscales, 1 when they are equal.
  m.rope_scaling = parse_rope_scaling(
      {{"type", "yarn"}, {"factor", 40.0}, {"mscale", 0.707}, {"mscale_all_dim", 0.707}}, "");
  EXPECT_DOUBLE_EQ(rope_attention_scaling(m), 1.0);
  m.rope_scaling.mscale = 1.0;
  EXPECT_DOUBLE_EQ(rope_attention_scaling(m), (0.1 * std::log(40.0) + 1) / (0.1 * 0.707 * std::log(40.0) + 1));
  // original_max_position_embeddings moves the ramp: a context of 64 instead of 256 leaves fewer
  // dimensions turning beyond beta_fast times, so more of them are interpolated.
  m.rope_scaling = parse_rope_scaling({{"rope_type", "yarn"}, {"factor", 4.0}}, "");
  const std::vector<double> over_max = rope_inv_freq(m, 1);
  m.rope_scaling.original_max_position_embeddings = 64;
  const std::vector<double> over_original = rope_inv_freq(m, 1);
  m.max_position_embeddings = 64;
  m.rope_scaling.original_max_position_embeddings = 0;
  EXPECT_EQ(rope_inv_freq(m, 1), over_original);
  EXPECT_NE(over_original, over_max);
}

// Dynamic NTK beyond the context is plain RoPE with a larger base: the decoder (batch forward and KV
// cache prefill) must pick the base from each call's largest position, and return to the original one.
TEST(RopeScaling, DecoderFollowsEachCallsLengthUnderDynamicNtk) {
  ModelConfig dyn;
  dyn.vocab_size = 64;
  dyn.hidden_size = 32;
  dyn.num_attention_heads = 4;
  dyn.intermediate_size = 48;
  dyn.max_position_embeddings = 8;
  dyn.initializer_range = 0.2;
  dyn.rope_scaling = parse_rope_scaling({{"rope_type", "dynamic"}, {"factor", 2.0}}, "");
  ModelConfig stretched = dyn, plain = dyn;
  stretched.rope_scaling = plain.rope_scaling = RopeScaling{};
  const int T = 12, hd = dyn.head_dim();
  stretched.rope_theta = dyn.rope_theta * std::pow(2.0 * T / 8 - 1, hd / (hd - 2.0));
  Decoder model(dyn, ComputeDtype::fp32), model_stretched(stretched, ComputeDtype::fp32),
      model_plain(plain, ComputeDtype::fp32);
  LocalParams params(model.layout());
  init_params(model.layout(), dyn, 3, params.weights());

  std::vector<std::int32_t> ids, pos, packed_pos, seq_ids, packed_seq, targets;
  for (int t = 0; t < T; ++t) {
    ids.push_back((7 * t + 3) % 64);
    pos.push_back(t);
    seq_ids.push_back(0);
    packed_pos.push_back(t < 6 ? t : t - 6);  // two samples of 6: positions stay within the context
    packed_seq.push_back(t < 6 ? 0 : 1);
  }
  for (int t = 0; t < T; ++t) targets.push_back(t + 1 < T ? ids[t + 1] : -100);
  const ModelInputs whole = upload_inputs(1, T, ids, pos, seq_ids, targets);
  const ModelInputs packed = upload_inputs(1, T, ids, packed_pos, packed_seq, targets);
  ModelInputs packed_unknown = packed;
  packed_unknown.position_limit = 0;  // read back from the device instead
  EXPECT_EQ(whole.position_limit, T);
  EXPECT_EQ(packed.position_limit, 6);

  const double d_whole = model.forward_loss(whole, params).loss_sum;
  EXPECT_DOUBLE_EQ(d_whole, model_stretched.forward_loss(whole, params).loss_sum);
  EXPECT_NE(d_whole, model_plain.forward_loss(whole, params).loss_sum);
  EXPECT_DOUBLE_EQ(model.forward_loss(packed, params).loss_sum, model_plain.forward_loss(packed, params).loss_sum);
  EXPECT_DOUBLE_EQ(model.forward_loss(whole, params).loss_sum, d_whole);
  EXPECT_DOUBLE_EQ(model.forward_loss(packed_unknown, params).loss_sum,
                   model_plain.forward_loss(packed, params).loss_sum);

  // Prefill of a 12-token prompt: the stretched base too; of a 5-token one: the plain base.
  for (const int n : {T, 5}) {
    const std::vector<std::vector<std::int32_t>> prompt = {std::vector<std::int32_t>(ids.begin(), ids.begin() + n)};
    const Decoder& ref = n > 8 ? model_stretched : model_plain;
    KvCache cache(dyn, 1, 16), cache_ref(ref.config(), 1, 16);
    View2<float> got("got", 1, dyn.vocab_size), want("want", 1, dyn.vocab_size);
    model.prefill(prompt, params, cache, got);
    ref.prefill(prompt, params, cache_ref, want);
    EXPECT_EQ(to_host(got), to_host(want)) << n;
  }
}

TEST(RopeScaling, TinyLlamaWithLlama3ScalingLossMatchesTransformers) {
  static SelfCommunicator self;
  const nlohmann::json& fx = fixture().at("tiny_llama_rope_llama3");
  const TrainConfig cfg =
      load_train_config("", {"--model_name_or_path=" + testing_util::hf_fixture_dir() + "/tiny_llama_rope_llama3"});
  EXPECT_EQ(cfg.model.rope_scaling.type, "llama3");
  Trainer tr(cfg, 1, self);
  const LossSums ls = tr.model().forward_loss(to_model_inputs(testing_util::hf_fixture_batch(fx)), tr.engine());
  const double loss = ls.loss_sum / static_cast<double>(ls.num_targets), want = fx.at("loss");
  ::testing::Test::RecordProperty("loss_rel_err", sci(std::abs(loss - want) / want));
  EXPECT_LT(std::abs(loss - want) / want, 1e-4);
  // The scaling matters at this tolerance: plain RoPE's loss is further away.
  EXPECT_GT(std::abs(fx.at("loss_plain_rope").get<double>() - want) / want, 1e-3);
}

TEST(RopeScaling, CheckpointMetadataAndExportedConfigKeepIt) {
  ModelConfig m;
  const nlohmann::json block = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                                {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  m.rope_scaling = parse_rope_scaling(block, "");
  const nlohmann::json meta = model_meta_json(m);
  EXPECT_EQ(meta.at("rope_scaling"), block);
  EXPECT_EQ(model_config_from_meta(meta).rope_scaling.factor, 8.0);
  EXPECT_EQ(hf_config_json(meta, nullptr, TensorDtype::F32).at("rope_scaling"), block);
  // Plain RoPE's metadata is what it was before rope_scaling existed.
  EXPECT_FALSE(model_meta_json(ModelConfig{}).contains("rope_scaling"));
  const nlohmann::json older = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_EQ(rope_scaling_json(parse_rope_scaling(older, "")), older);
}

std::string error_of(const nlohmann::json& block) {
  try {
    parse_rope_scaling(block, "config.json: ");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(RopeScaling, BadBlocksNameTheKey) {
  EXPECT_EQ(parse_rope_scaling(nullptr, "").type, "default");
  EXPECT_EQ(parse_rope_scaling({{"rope_type", "default"}}, "").type, "default");
  EXPECT_EQ(error_of("llama3"), "config.json: rope_scaling: expected an object or null, got \"llama3\"");
  EXPECT_EQ(error_of({{"factor", 2.0}}),
            "config.json: rope_scaling.rope_type: missing (expected default, linear, dynamic, yarn or llama3)");
  EXPECT_EQ(error_of({{"rope_type", 3}}), "config.json: rope_scaling.rope_type: expected a string, got 3");
  EXPECT_EQ(error_of({{"rope_type", "longrope"}, {"factor", 2.0}}),
            "config.json: rope_scaling.rope_type: \"longrope\" is not supported (expected default, linear, dynamic, "
            "yarn or llama3)");
  EXPECT_EQ(error_of({{"type", "linear"}}), "config.json: rope_scaling.factor: missing (expected a number >= 1)");
  EXPECT_EQ(error_of({{"type", "linear"}, {"factor", 0.5}}),
            "config.json: rope_scaling.factor: expected a number >= 1, got 0.5");
  EXPECT_EQ(error_of({{"type", "dynamic"}, {"factor", "2"}}),
            "config.json: rope_scaling.factor: expected a number >= 1, got \"2\"");
  EXPECT_EQ(error_of({{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0}, {"high_freq_factor", 1.0},
                      {"original_max_position_embeddings", 8192}}),
            "config.json: rope_scaling.high_freq_factor: must be greater than low_freq_factor 4.0, got 1.0");
  EXPECT_EQ(error_of({{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                      {"original_max_position_embeddings", 8192.5}}),
            "config.json: rope_scaling.original_max_position_embeddings: expected a positive integer, got 8192.5");
  EXPECT_EQ(error_of({{"rope_type", "linear"}, {"factor", 2.0}, {"low_freq_factor", 1.0}}),
            "config.json: rope_scaling.low_freq_factor: is not a linear parameter (expected factor)");
  EXPECT_EQ(error_of({{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", -1}}),
            "config.json: rope_scaling.beta_fast: expected a number > 0, got -1");
  EXPECT_EQ(error_of({{"rope_type", "yarn"}, {"factor", 4.0}, {"truncate", 1}}),
            "config.json: rope_scaling.truncate: expected true or false, got 1");
}

}  // namespace
}  // namespace shardft
