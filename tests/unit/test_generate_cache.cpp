// Generation with a KV cache: the decode attention kernel against the full attention's last query,
// Decoder::prefill / decode_step against forward_logits over each row's whole prefix (GQA, biases on and
// off, tied and untied, fp32 and bf16, rows of different lengths leaving at different steps), and the
// decoding loop giving the same tokens with and without the cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "finite_difference.hpp"
#include "kernels/attention.hpp"
#include "kernels/attention_decode.hpp"
#include "kernels/elementwise.hpp"
#include "model/decoder.hpp"
#include "model/decoder_cache.hpp"
#include "train/evaluate.hpp"
#include "infer/chat_model.hpp"
#include "infer/generate.hpp"

namespace shardft {
namespace {
using namespace kernel_test;

TEST(AttentionDecode, EqualsTheFullAttentionsLastQueryOfEachRow) {
  // Two rows of different lengths in a cache of 4 slots; rows name their slots out of order.
  const int H = 4, G = 2, hd = 8, max_len = 9, slots = 4;
  const std::vector<int> lens = {7, 3};
  const std::vector<int> slot = {2, 0};
  const auto kc = random_vector(static_cast<std::size_t>(slots) * max_len * G * hd, 1);
  const auto vc = random_vector(kc.size(), 2);
  const auto q = random_vector(lens.size() * H * hd, 3, -2.f, 2.f);
  auto k_d = to_device(kc, static_cast<std::size_t>(slots) * max_len, G * hd, "k");
  auto v_d = to_device(vc, static_cast<std::size_t>(slots) * max_len, G * hd, "v");
  auto q_d = to_device(q, lens.size(), H * hd, "q");
  View2<float> o("o", lens.size(), H * hd);
  View1<float> scores("scores", lens.size() * H * max_len);
  const DecodeAttentionShape shape{static_cast<int>(lens.size()), H, G, hd, max_len};
  attention_decode(shape, q_d, k_d, v_d, to_device(slot), to_device(lens), o, scores);
  const auto got = to_host(o);

  for (std::size_t i = 0; i < lens.size(); ++i) {
    // The same row through attention_forward: its keys and values as a sequence, its query last.
    const int T = lens[i];
    std::vector<float> qs(static_cast<std::size_t>(T) * H * hd, 0.f), ks(static_cast<std::size_t>(T) * G * hd),
        vs(ks.size());
    for (int j = 0; j < T; ++j) {
      for (int c = 0; c < G * hd; ++c) {
        ks[j * G * hd + c] = kc[(static_cast<std::size_t>(slot[i]) * max_len + j) * G * hd + c];
        vs[j * G * hd + c] = vc[(static_cast<std::size_t>(slot[i]) * max_len + j) * G * hd + c];
      }
    }
    std::copy(q.begin() + i * H * hd, q.begin() + (i + 1) * H * hd, qs.begin() + (T - 1) * H * hd);
    View2<float> of("of", T, H * hd);
    View1<float> probs("probs", static_cast<std::size_t>(H) * T * T);
    attention_forward({1, T, H, G, hd}, to_device(qs, T, H * hd), to_device(ks, T, G * hd), to_device(vs, T, G * hd),
                      to_device(std::vector<std::int32_t>(T, 0)), of, probs);
    const auto want = to_host(of);
    for (int c = 0; c < H * hd; ++c) {
      EXPECT_EQ(got[i * H * hd + c], want[(T - 1) * H * hd + c]) << "row " << i << " column " << c;
    }
  }
}

// ---- the cached forward against the full forward ---------------------------------------------

struct Variant {
  bool qkv_bias, o_bias, tied, bf16, memory_efficient;
  bool qwen3 = false;  // q_norm / k_norm, head_dim 12 != hidden 32 / 4 heads
  std::string name() const {
    return std::string(bf16 ? "bf16" : "fp32") + (tied ? " tied" : " untied") + (qkv_bias ? " qkv_bias" : "") +
           (o_bias ? " o_bias" : "") + (memory_efficient ? " memory_efficient" : "") + (qwen3 ? " qwen3" : "");
  }
};

ModelConfig model_of(const Variant& v) {
  ModelConfig m;
  m.vocab_size = 272;
  m.hidden_size = 32;
  m.num_hidden_layers = 2;
  m.num_attention_heads = 4;
  m.num_key_value_heads = 2;  // GQA: two query heads per kv head
  m.intermediate_size = 48;
  m.max_position_embeddings = 64;
  m.tie_word_embeddings = v.tied;
  m.qkv_bias = v.qkv_bias;
  m.o_bias = v.o_bias;
  m.qk_norm = v.qwen3;
  m.explicit_head_dim = v.qwen3 ? 12 : 0;
  m.initializer_range = 0.2;
  return m;
}

// Random weights, with biases and norm weights away from their 0 / 1 initialisation so that they count.
void randomise(const ParamLayout& layout, const ModelConfig& cfg, bool bf16, View1<float> flat) {
  init_params(layout, cfg, 11, flat);
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), flat);
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    if (spec.kind == ParamKind::matrix) continue;
    const auto noise = random_vector(static_cast<std::size_t>(spec.numel()), 100 + static_cast<std::uint32_t>(p),
                                     -0.5f, 0.5f);
    for (std::int64_t i = 0; i < spec.numel(); ++i) host(layout.offset(static_cast<int>(p)) + i) += noise[i];
  }
  Kokkos::deep_copy(flat, host);
  if (bf16) round_to_bf16(flat, flat);  // as open_chat_model loads a bf16 model
}

// forward_logits at each sequence's last token, the sequences right-padded into one batch: what the
// decoding loop without a cache computes.
std::vector<float> full_forward(Decoder& model, ParamSource& params, const std::vector<std::vector<std::int32_t>>& seqs) {
  const int n = static_cast<int>(seqs.size());
  int T = 0;
  for (const auto& s : seqs) T = std::max(T, static_cast<int>(s.size()));
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n) * T, 0), pos(ids.size()), seq_ids(ids.size(), 0),
      targets(ids.size(), kIgnoreIndex), last;
  for (int r = 0; r < n; ++r) {
    std::copy(seqs[r].begin(), seqs[r].end(), ids.begin() + static_cast<std::ptrdiff_t>(r) * T);
    for (int t = 0; t < T; ++t) pos[static_cast<std::size_t>(r) * T + t] = t;
    last.push_back(r * T + static_cast<int>(seqs[r].size()) - 1);
  }
  View2<float> logits("ref_logits", n, model.config().vocab_size);
  model.forward_logits(upload_inputs(n, T, ids, pos, seq_ids, targets), params, to_device(last), logits);
  return to_host(logits);
}

// Largest |got - want| over a row, relative to the row's largest |want|.
double row_error(const std::vector<float>& got, const std::vector<float>& want, int row, int vocab) {
  double diff = 0, scale = 0;
  for (int v = 0; v < vocab; ++v) {
    const std::size_t i = static_cast<std::size_t>(row) * vocab + v;
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return diff / scale;
}

TEST(KvCache, LogitsAtEveryStepEqualTheFullPrefixForward) {
  std::vector<Variant> variants;
  for (bool bf16 : {false, true})
    for (bool tied : {true, false})
      for (auto [qkv, o] : {std::pair{false, false}, std::pair{true, false}, std::pair{true, true}})
        variants.push_back({qkv, o, tied, bf16, false});
  variants.push_back({true, true, false, false, true});  // prefill through the memory-efficient kernel
  variants.push_back({false, false, true, true, true});
  variants.push_back({false, false, true, false, false, true});
  variants.push_back({false, false, false, true, true, true});
  for (const Variant& var : variants) {
    SCOPED_TRACE(var.name());
    const ModelConfig cfg = model_of(var);
    Decoder model(cfg, var.bf16 ? ComputeDtype::bf16 : ComputeDtype::fp32);
    model.set_memory_efficient_attention(var.memory_efficient);
    LocalParams params(model.layout());
    randomise(model.layout(), cfg, var.bf16, params.weights());
    const int V = cfg.vocab_size;
    // Three rows of different lengths (one a single token); row 0 leaves after 3 steps.
    std::vector<std::vector<std::int32_t>> seqs = {{5, 80, 81, 82, 9}, {7, 1, 200, 3, 4, 5, 6, 100, 101, 102, 7}, {42}};
    const int steps = 9;
    KvCache cache(cfg, 3, 11 + steps);
    View2<float> logits("logits", 3, V);
    model.prefill(seqs, params, cache, logits);
    EXPECT_EQ(cache.length, (std::vector<int>{5, 11, 1}));
    double worst = 0;
    const auto want0 = full_forward(model, params, seqs), got0 = to_host(logits);
    for (int r = 0; r < 3; ++r) worst = std::max(worst, row_error(got0, want0, r, V));
    for (int step = 0; step < steps; ++step) {
      // Rows named out of order; the tokens fed are arbitrary (not the model's choice).
      std::vector<int> rows = step < 3 ? std::vector<int>{2, 0, 1} : std::vector<int>{1, 2};
      std::vector<std::int32_t> tokens;
      std::vector<std::vector<std::int32_t>> active;
      for (int r : rows) {
        tokens.push_back((r * 31 + step * 17 + 5) % V);
        seqs[r].push_back(tokens.back());
        active.push_back(seqs[r]);
      }
      View2<float> step_logits("step_logits", rows.size(), V);
      model.decode_step(rows, tokens, params, cache, step_logits);
      const auto want = full_forward(model, params, active), got = to_host(step_logits);
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const double e = row_error(got, want, static_cast<int>(i), V);
        EXPECT_LT(e, 1e-5) << "step " << step << " row " << rows[i];
        worst = std::max(worst, e);
      }
    }
    EXPECT_EQ(cache.length, (std::vector<int>{8, 11 + steps, 1 + steps}));
    std::printf("  %-36s largest relative difference %.2e\n", var.name().c_str(), worst);
  }
}

TEST(KvCache, RejectsRowsWithoutRoomOrNotPrefilled) {
  const ModelConfig cfg = model_of({false, false, true, false, false});
  Decoder model(cfg, ComputeDtype::fp32);
  LocalParams params(model.layout());
  randomise(model.layout(), cfg, false, params.weights());
  KvCache cache(cfg, 2, 4);
  View2<float> one("one", 1, cfg.vocab_size), two("two", 2, cfg.vocab_size);
  EXPECT_THROW(model.decode_step({0}, {1}, params, cache, one), std::invalid_argument);  // not prefilled
  EXPECT_THROW(model.prefill({{1, 2, 3, 4, 5}, {1}}, params, cache, two), std::invalid_argument);  // too long
  model.prefill({{1, 2, 3}, {1}}, params, cache, two);
  model.decode_step({0}, {4}, params, cache, one);                                       // fills row 0
  EXPECT_THROW(model.decode_step({0}, {5}, params, cache, one), std::invalid_argument);  // full
  EXPECT_THROW(model.decode_step({1, 1}, {5, 6}, params, cache, two), std::invalid_argument);
  EXPECT_THROW(model.decode_step({2}, {5}, params, cache, one), std::invalid_argument);
}

// Token ids are checked on the host where each batch is built (prompts, decode tokens, uploaded
// micro-batches), before anything changes; the forward itself never copies ids back.
TEST(KvCache, RejectsTokenIdsOutsideTheVocabularyBeforeTouchingTheCache) {
  const ModelConfig cfg = model_of({false, false, true, false, false});
  const int V = cfg.vocab_size;
  Decoder model(cfg, ComputeDtype::fp32);
  LocalParams params(model.layout());
  randomise(model.layout(), cfg, false, params.weights());
  KvCache cache(cfg, 2, 4);
  View2<float> two("two", 2, V);
  EXPECT_THROW(model.prefill({{1, 2}, {3, V}}, params, cache, two), std::out_of_range);
  EXPECT_EQ(cache.length, (std::vector<int>{0, 0}));
  model.prefill({{1, 2}, {3}}, params, cache, two);
  try {
    model.decode_step({0, 1}, {4, -1}, params, cache, two);
    ADD_FAILURE() << "no exception for id -1";
  } catch (const std::out_of_range& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("token id -1 at position 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[0, " + std::to_string(V) + ")"), std::string::npos) << msg;
  }
  EXPECT_EQ(cache.length, (std::vector<int>{2, 1}));
}

TEST(ModelInputs, UploadChecksIdsAndTargetsAgainstTheVocabularyOnTheHost) {
  const std::vector<std::int32_t> pos = {0, 1, 2}, seq = {0, 0, 0}, targets = {2, 271, kIgnoreIndex};
  EXPECT_EQ(upload_inputs(1, 3, {0, 2, 271}, pos, seq, targets, 272).checked_vocab, 272);
  EXPECT_EQ(upload_inputs(1, 3, {0, 2, 271}, pos, seq, targets).checked_vocab, 0);
  try {
    upload_inputs(1, 3, {0, 272, 3}, pos, seq, targets, 272);
    ADD_FAILURE() << "no exception for id 272";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("token id 272 at position 1 is outside the vocabulary [0, 272)"),
              std::string::npos)
        << e.what();
  }
  for (const std::int32_t bad : {272, -1, -99}) {
    try {
      upload_inputs(1, 3, {0, 1, 3}, pos, seq, {2, 3, bad}, 272);
      ADD_FAILURE() << "no exception for target " << bad;
    } catch (const std::out_of_range& e) {
      EXPECT_NE(std::string(e.what()).find("target " + std::to_string(bad) + " at position 2"), std::string::npos)
          << e.what();
    }
  }
}

// A batch uploaded without the vocabulary is still checked, by the decoder (through a host copy).
TEST(ModelInputs, DecoderChecksIdsOfUncheckedBatches) {
  const ModelConfig cfg = model_of({false, false, true, false, false});
  Decoder model(cfg, ComputeDtype::fp32);
  LocalParams params(model.layout());
  randomise(model.layout(), cfg, false, params.weights());
  const std::vector<std::int32_t> pos = {0, 1, 2}, seq = {0, 0, 0}, targets = {2, 3, kIgnoreIndex};
  EXPECT_THROW(model.forward_loss(upload_inputs(1, 3, {0, cfg.vocab_size, 3}, pos, seq, targets), params),
               std::out_of_range);
  // Checked against a larger vocabulary than the model's is not checked enough.
  EXPECT_THROW(model.forward_loss(upload_inputs(1, 3, {0, cfg.vocab_size, 3}, pos, seq, targets, cfg.vocab_size + 1),
                                  params),
               std::out_of_range);
  EXPECT_EQ(model.forward_loss(upload_inputs(1, 3, {0, 1, 3}, pos, seq, targets, cfg.vocab_size), params).num_targets,
            2);
}

// ---- the decoding loop with and without the cache ---------------------------------------------

TEST(KvCache, GenerationGivesTheSameTokensAsWithoutTheCache) {
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16" : "fp32");
    ModelConfig cfg = model_of({true, false, false, bf16, false});
    cfg.initializer_range = 0.5;  // peaked logits: greedy is not decided by rounding
    Decoder model(cfg, bf16 ? ComputeDtype::bf16 : ComputeDtype::fp32);
    LocalParams params(model.layout());
    randomise(model.layout(), cfg, bf16, params.weights());
    const std::vector<std::vector<std::int32_t>> prompts = {
        {1, 117, 112, 112, 101, 114, 58, 32, 97, 98}, {1, 120}, {1, 113, 119, 101, 114, 116, 121, 117, 105, 111, 112}};
    const std::int32_t pad = 0;
    SamplingOptions sampled;
    sampled.temperature = 1.0;
    sampled.top_p = 0.95;
    sampled.seed = 77;
    // Greedy and sampled; a context limit that stops the long prompt early; a stop id.
    for (const SamplingOptions& opt : {SamplingOptions{}, sampled}) {
      for (int limit : {64, 16}) {
        const auto with = generate(model, params, prompts, 24, limit, {}, pad, opt, 3, true);
        const auto without = generate(model, params, prompts, 24, limit, {}, pad, opt, 3, false);
        for (std::size_t r = 0; r < prompts.size(); ++r) {
          EXPECT_EQ(with[r].tokens, without[r].tokens) << "row " << r << " limit " << limit;
          EXPECT_EQ(with[r].finish, without[r].finish) << "row " << r << " limit " << limit;
        }
        const auto stop = std::vector<std::int32_t>{with[0].tokens.at(4)};
        const auto with_stop = generate(model, params, prompts, 24, limit, stop, pad, opt, 3, true);
        const auto without_stop = generate(model, params, prompts, 24, limit, stop, pad, opt, 3, false);
        EXPECT_EQ(with_stop[0].finish, FinishReason::stop);
        for (std::size_t r = 0; r < prompts.size(); ++r) {
          EXPECT_EQ(with_stop[r].tokens, without_stop[r].tokens) << "row " << r;
          EXPECT_EQ(with_stop[r].finish, without_stop[r].finish) << "row " << r;
        }
      }
    }
    // Evaluation's greedy loop is the cached one.
    const auto eval_rows = greedy_generate(model, params, prompts, 24, 64, {}, pad);
    const auto without = generate(model, params, prompts, 24, 64, {}, pad, SamplingOptions{}, 0, false);
    for (std::size_t r = 0; r < prompts.size(); ++r) EXPECT_EQ(eval_rows[r], without[r].tokens);
  }
}

}  // namespace
}  // namespace shardft
