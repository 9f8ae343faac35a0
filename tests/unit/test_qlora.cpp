// QLoRA (load_in_4bit): the recipe keys, and a QLoRA model against a LoRA model whose base matrices
// were replaced by dequantize(quantize(W)) here, from the NF4 kernels directly: the same losses, the
// same A/B gradients and the same A/B after 3 steps, exactly (fp32 and bf16 compute), at ZeRO stages
// 0-3 on one rank. The engine holds those matrices as NF4 bytes: MemoryReport and the preflight estimate
// count nf4_storage_bytes (about 0.516 B a parameter) for them instead of 4 (2 with bf16).
#include <gtest/gtest.h>

#include <cstring>

#include "tests/common/bf16_values.hpp"
#include "tests/common/self_communicator.hpp"
#include "kernels/nf4_quantize.hpp"
#include "tests/common/peft_fixture_run.hpp"

namespace shardft {
namespace {
using namespace testing_util;

std::string config_error(const std::vector<std::string>& flags) {
  try {
    load_train_config("", flags);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(QloraConfig, KeysAndTheirLimits) {
  const std::string lora = "--use_peft=true";
  std::string e = config_error({"--load_in_4bit=true"});
  EXPECT_NE(e.find("load_in_4bit"), std::string::npos) << e;
  EXPECT_NE(e.find("use_peft"), std::string::npos) << e;
  e = config_error({lora, "--load_in_4bit=true", "--bnb_4bit_quant_type=fp4"});
  EXPECT_NE(e.find("bnb_4bit_quant_type"), std::string::npos) << e;
  e = config_error({lora, "--load_in_4bit=true", "--bnb_4bit_use_double_quant=false"});
  EXPECT_NE(e.find("bnb_4bit_use_double_quant"), std::string::npos) << e;
  e = config_error({lora, "--load_in_4bit=true", "--bnb_4bit_compute_dtype=bfloat16"});  // fp32 run
  EXPECT_NE(e.find("bnb_4bit_compute_dtype"), std::string::npos) << e;
  e = config_error({lora, "--load_in_4bit=true", "--bnb_4bit_compute_dtype=float16"});
  EXPECT_NE(e.find("bnb_4bit_compute_dtype"), std::string::npos) << e;
  EXPECT_EQ(config_error({lora, "--load_in_4bit=true", "--bf16=true", "--bnb_4bit_compute_dtype=bfloat16"}), "");
  const TrainConfig c = load_train_config("", {lora, "--load_in_4bit=true", "--zero_stage=2"});
  EXPECT_TRUE(lora_spec(c).load_in_4bit);
  const ParamLayout layout(c.model, lora_spec(c));
  // Every decoder linear's matrix, targeted or not (PEFT's default targets only q_proj and v_proj);
  // never the embedding, norms or lm_head, nor A and B.
  int nf4 = 0;
  for (const ParamSpec& p : layout.params()) {
    const bool linear = p.name.find("_proj.weight") != std::string::npos;
    EXPECT_EQ(p.nf4, linear) << p.name;
    nf4 += p.nf4;
  }
  EXPECT_EQ(nf4, 7 * layout.num_layers());
}

bool quantized_in_qlora(const ParamSpec& p) { return p.frozen && p.name.find("_proj.weight") != std::string::npos; }

// The LoRA model's base with every decoder linear matrix replaced by dequantize(quantize(W)) in fp32.
void replace_base_by_nf4_roundtrip(Trainer& lora) {
  const ParamLayout& layout = lora.model().layout();
  std::vector<float> values = lora.engine().gather_master();
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    if (!quantized_in_qlora(spec)) continue;
    const std::int64_t off = layout.offset(static_cast<int>(p)), n = spec.numel();
    View1<float> w("w", n), back("back", n);
    auto host = Kokkos::create_mirror_view(w);
    std::copy_n(values.begin() + off, n, host.data());
    Kokkos::deep_copy(w, host);
    const Nf4Tensor q = nf4_quantize(w, spec.shape, spec.name);
    nf4_dequantize(q, Unmanaged1<float>(back.data(), n));
    Kokkos::deep_copy(host, back);
    std::copy_n(host.data(), n, values.begin() + off);
  }
  lora.engine().load_weights(values);
}

TEST(Qlora, EqualsLoraOnTheNf4RoundTrippedBase) {
  const std::string name = "llama_all_linear";
  const TokenBatch batch = peft_fixture_batch(name);
  for (int stage : {0, 1, 2, 3}) {
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE("stage " + std::to_string(stage) + (bf16 ? " bf16" : " fp32"));
      const std::vector<std::string> flags = {"--zero_stage=" + std::to_string(stage), bf16 ? "--bf16=true" : "--bf16=false"};
      std::vector<std::string> q_flags = flags;
      q_flags.push_back("--load_in_4bit=true");
      Trainer qlora(peft_fixture_config(name, q_flags), 3, self());
      Trainer lora(peft_fixture_config(name, flags), 3, self());
      replace_base_by_nf4_roundtrip(lora);
      const ParamLayout& layout = qlora.model().layout();

      const std::vector<float> q_before = qlora.engine().gather_master(), l_before = lora.engine().gather_master();
      ASSERT_EQ(q_before.size(), l_before.size());
      EXPECT_EQ(std::memcmp(q_before.data(), l_before.data(), 4 * q_before.size()), 0) << "weights the model reads";

      const PeftFixtureRun q = run_peft_fixture(qlora, batch, 3);
      const PeftFixtureRun l = run_peft_fixture(lora, batch, 3);
      for (int s = 0; s < 3; ++s) EXPECT_EQ(q.losses[s], l.losses[s]) << "step " << s + 1;
      EXPECT_EQ(std::memcmp(q.grads_step1.data(), l.grads_step1.data(), 4 * q.grads_step1.size()), 0);
      EXPECT_EQ(std::memcmp(q.weights_after.data(), l.weights_after.data(), 4 * q.weights_after.size()), 0);
      // Quantization changed the base: a test of something (the losses differ from unquantized LoRA's).
      Trainer plain(peft_fixture_config(name, flags), 3, self());
      const double plain_loss = plain.step({batch}).loss;
      EXPECT_NE(plain_loss, q.losses[0]);

      // Memory: the NF4 matrices' bytes, and nothing else of them, among the frozen weights.
      std::int64_t nf4_bytes = 0, nf4_numel = 0;
      for (const ParamSpec& p : layout.params()) {
        if (!p.nf4) continue;
        nf4_bytes += nf4_storage_bytes(p.numel());
        nf4_numel += p.numel();
      }
      EXPECT_EQ(q.memory.nf4_weights, nf4_bytes);  // one rank: a stage-3 shard is the whole
      EXPECT_NEAR(static_cast<double>(nf4_bytes) / static_cast<double>(nf4_numel), 0.516, 0.01);
      const std::int64_t per_value = bf16 ? 2 : 4;
      EXPECT_LE(q.memory.frozen_weights - nf4_bytes, l.memory.frozen_weights - per_value * nf4_numel);
      const RankMemoryEstimate& e = qlora.memory_estimate();
      EXPECT_EQ(e.frozen_weights, static_cast<double>(q.memory.frozen_weights));
      EXPECT_EQ(e.weights, static_cast<double>(q.memory.weights));
      std::printf("[ qlora stage %d %s ] losses %.9g %.9g %.9g (LoRA on the unquantized base: %.9g); frozen "
                  "weights %lld B (LoRA %lld B), NF4 %lld B for %lld values\n",
                  stage, bf16 ? "bf16" : "fp32", q.losses[0], q.losses[1], q.losses[2],
                  plain_loss, static_cast<long long>(q.memory.frozen_weights),
                  static_cast<long long>(l.memory.frozen_weights), static_cast<long long>(nf4_bytes),
                  static_cast<long long>(nf4_numel));
    }
  }
}

// Stage 3 keeps a block's NF4 bytes prefetched past a pass that ends early (a head acquired for backward
// prefetches the last layer, here for a backward that never comes). Loading new weights gives those old
// bytes back once their gathers are done (none is left held or counted; no gather writes into a freed
// buffer), and the base read after load_weights is the new weights' NF4 round trip, exactly as in a
// trainer that never prefetched.
TEST(Qlora, LoadingWeightsDropsPrefetchedBytes) {
  const std::string name = "llama_all_linear";
  const std::vector<std::string> flags = {"--zero_stage=3", "--load_in_4bit=true"};
  Trainer prefetched(peft_fixture_config(name, flags), 3, self());
  Trainer fresh(peft_fixture_config(name, flags), 3, self());
  const ParamLayout& layout = prefetched.model().layout();
  std::vector<float> values = prefetched.engine().gather_master();
  for (float& v : values) v = -2.f * v;  // other weights, other NF4 bytes
  const int head = layout.head_block();
  prefetched.engine().acquire(head, Pass::backward);
  prefetched.engine().release(head, Pass::backward);
  ASSERT_GT(prefetched.engine().frozen_part()->nf4()->transient_bytes(), 0) << "nothing was left prefetched";
  prefetched.engine().load_weights(values);
  EXPECT_EQ(prefetched.engine().frozen_part()->nf4()->transient_bytes(), 0);
  fresh.engine().load_weights(values);
  const std::vector<float> read = prefetched.engine().gather_master(), expected = fresh.engine().gather_master();
  ASSERT_EQ(read.size(), expected.size());
  EXPECT_EQ(std::memcmp(read.data(), expected.data(), 4 * read.size()), 0);
}

// A block's NF4 matrices are dequantized into one buffer in layout order: a layer's q, k and v lie back
// to back, and so do gate and up, so the model stacks q/k/v into one GEMM (and reads [gate; up] without a
// copy) as it does over an unquantized base; each matrix holds its own dequantized values (those of a
// LoRA base replaced by its NF4 round trip).
TEST(Qlora, ABlocksMatricesAreDequantizedBackToBack) {
  Trainer qlora(peft_fixture_config("llama_all_linear", {"--bf16=true", "--load_in_4bit=true"}), 3, self());
  Trainer lora(peft_fixture_config("llama_all_linear", {"--bf16=true"}), 3, self());
  replace_base_by_nf4_roundtrip(lora);
  const ParamLayout& layout = qlora.model().layout();
  const LayerParams& P = layout.layer(0);
  ZeroEngine& engine = qlora.engine();
  engine.acquire(0, Pass::forward);
  lora.engine().acquire(0, Pass::forward);
  auto at = [&](int p) { return engine.weight_bf16(p); };
  auto follows = [&](int a, int b) { return at(a).data() + at(a).extent(0) == at(b).data(); };
  EXPECT_TRUE(follows(P.q_proj, P.k_proj));
  EXPECT_TRUE(follows(P.k_proj, P.v_proj));
  EXPECT_TRUE(follows(P.gate_proj, P.up_proj));
  for (int p : {P.q_proj, P.k_proj, P.v_proj, P.o_proj, P.gate_proj, P.up_proj, P.down_proj}) {
    const std::vector<float> got = widened(at(p));
    ASSERT_EQ(static_cast<std::int64_t>(got.size()), layout.params()[p].numel());
    EXPECT_EQ(got, widened(lora.engine().weight_bf16(p))) << layout.params()[p].name;
  }
  engine.release(0, Pass::forward);
  lora.engine().release(0, Pass::forward);
}

}  // namespace
}  // namespace shardft
