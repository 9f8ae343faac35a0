// The training step is device-resident: after the first step has sized every buffer, a step's hot
// path (forward, backward, reduction, clipping, optimizer, weight refresh) makes no host<->device copy,
// no host sync and no allocation; only the batch's inputs go up. On Serial, "device" memory is host
// memory: the counters see the call sites that would copy or wait on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/common/self_communicator.hpp"
#include "data/sft_data.hpp"
#include "kernels/device_traffic.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/kernel_scratch.hpp"
#include "train/step_kernels_report.hpp"
#include "train/trainer.hpp"

namespace shardft {
namespace {

TrainConfig tiny_config() {
  TrainConfig c;
  c.model.vocab_size = ByteTokenizer::kVocabSize;
  c.model.hidden_size = 32;
  c.model.num_hidden_layers = 2;
  c.model.num_attention_heads = 4;
  c.model.num_key_value_heads = 2;
  c.model.intermediate_size = 48;
  c.learning_rate = 1e-2;
  c.lr_scheduler_type = "constant";
  c.max_grad_norm = 0.5;  // clipping on: its norm must stay on the device too
  c.logits_chunk_tokens = 16;
  c.seed = 5;
  return c;
}

std::vector<TokenBatch> micro_batches() {
  ByteTokenizer tok;
  std::vector<TokenizedSample> s;
  s.push_back(apply_chat_template(tok, {{"user", "upper: abc"}, {"assistant", "ABC"}}, 48));
  s.push_back(apply_chat_template(tok, {{"user", "upper: qwerty"}, {"assistant", "QWERTY"}}, 48));
  return {collate(s, {0, 1}), collate(s, {1, 0})};
}

struct Variant {
  const char* name;
  int stage;
  bool bf16, checkpointing;
  const char* attention;
  const char* communication = "fp32";  // communication_data_type
  bool quantized_weights = false;      // ZeRO++ qwZ
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

class StepTraffic : public testing::TestWithParam<Variant> {};

TEST_P(StepTraffic, StepsAfterTheFirstMoveOnlyTheirInputs) {
  install_device_traffic_hooks();
  const Variant v = GetParam();
  TrainConfig cfg = tiny_config();
  cfg.zero_stage = v.stage;
  cfg.bf16 = v.bf16;
  cfg.gradient_checkpointing = v.checkpointing;
  cfg.attn_implementation = v.attention;
  cfg.communication_data_type = v.communication;
  cfg.zero_quantized_weights = v.quantized_weights;
  Trainer tr(cfg, 10, self());
  const auto batches = micro_batches();
  // Per micro-batch: input ids, positions, seq ids and targets, and the segment starts of its packed
  // samples (ModelInputs::segment_starts).
  std::int64_t input_bytes = 0;
  for (const TokenBatch& b : batches) {
    const ModelInputs in = to_model_inputs(b, ByteTokenizer::kVocabSize);
    ASSERT_GT(in.segments, 0);
    input_bytes += 4 * static_cast<std::int64_t>(b.input_ids.size() * sizeof(std::int32_t)) +
                   (in.segments + 1) * static_cast<std::int64_t>(sizeof(std::int32_t));
  }

  tr.step(batches);
  EXPECT_GT(tr.last_step_traffic().allocations, 0) << "the first step sizes the buffers";
  for (int step = 2; step <= 3; ++step) {
    const DeviceTraffic before = device_traffic();
    const StepStats st = tr.step(batches);
    const DeviceTraffic& hot = tr.last_step_traffic();
    EXPECT_TRUE(hot.none_but_uploads()) << v.name << " step " << step << ": " << hot.describe();
    // One copy up per micro-batch (model/decoder.hpp InputBuffers), the same bytes as five.
    EXPECT_EQ(hot.uploads, static_cast<std::int64_t>(batches.size())) << hot.describe();
    EXPECT_EQ(hot.upload_bytes, input_bytes);
    // The whole step adds exactly its one read-back to the hot path: loss, gradient norm and the count
    // of non-finite values ZeRO++ met.
    const DeviceTraffic whole = device_traffic().since(before);
    EXPECT_EQ(whole.copies, 1) << whole.describe();
    EXPECT_EQ(whole.syncs, 1) << whole.describe();
    EXPECT_EQ(whole.copy_bytes, 3 * static_cast<std::int64_t>(sizeof(double)));
    EXPECT_TRUE(std::isfinite(st.loss) && st.loss > 0);
    EXPECT_GT(st.grad_norm, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, StepTraffic,
                         testing::Values(Variant{"fp32_stage0", 0, false, false, "memory_efficient"},
                                         Variant{"fp32_stage2_eager", 2, false, false, "eager"},
                                         Variant{"bf16_stage3_checkpointing", 3, true, true, "memory_efficient"},
                                         Variant{"bf16_stage1", 1, true, false, "memory_efficient"},
                                         Variant{"bf16_comm_stage0", 0, true, false, "memory_efficient", "bf16"},
                                         Variant{"bf16_comm_stage2", 2, false, false, "memory_efficient", "bf16"},
                                         Variant{"bf16_comm_stage3", 3, false, true, "memory_efficient", "bf16"},
                                         Variant{"qwz_stage3", 3, false, false, "memory_efficient", "fp32", true},
                                         Variant{"qwz_bf16_comm_stage3", 3, true, false, "memory_efficient", "bf16", true}),
                         [](const testing::TestParamInfo<Variant>& i) { return std::string(i.param.name); });

// A step's device counts (train/trainer.hpp StepKernels) as a CPU build reports what the GPU path runs:
// in bf16 every GEMM of the step (forward, dgrad, wgrad, the LM head) has bf16 operands, so none widens
// a bf16 operand to fp32; in fp32 none is bf16. Steps after the first allocate nothing and sync once
// (the read-back), and launch a bounded number of kernels per decoder layer.
struct KernelVariant {
  const char* name;
  int stage;
  bool bf16, checkpointing;
  bool lora = false;  // LoRA on every linear layer, trl's dropout 0.05, the base frozen
};

class StepKernelCounts : public testing::TestWithParam<KernelVariant> {};

TEST_P(StepKernelCounts, BfloatGemmsStayOnTensorCores) {
  install_device_traffic_hooks();
  const KernelVariant v = GetParam();
  TrainConfig cfg = tiny_config();
  cfg.zero_stage = v.stage;
  cfg.bf16 = v.bf16;
  cfg.gradient_checkpointing = v.checkpointing;
  if (v.lora) {
    cfg.use_peft = true;
    cfg.lora_target_modules = "all-linear";
  }
  Trainer tr(cfg, 10, self());
  const auto batches = micro_batches();
  tr.step(batches);
  tr.step(batches);
  const StepKernels& k = tr.last_step_kernels();
  EXPECT_GT(k.gemm.calls, 0);
  EXPECT_GT(k.gemm.total_flops(), 0);
  if (v.bf16) {
    EXPECT_DOUBLE_EQ(k.gemm.tensor_core_share(), 1.0)
        << "fp32 " << k.gemm.fp32_flops << ", mixed " << k.gemm.mixed_flops << " of " << k.gemm.total_flops();
    EXPECT_EQ(k.gemm.widened_elements, 0);
  } else {
    EXPECT_EQ(k.gemm.tensor_core_flops, 0);
    EXPECT_EQ(k.gemm.widened_elements, 0);
  }
  EXPECT_EQ(k.traffic.allocations, 0) << k.traffic.describe();
  EXPECT_EQ(k.traffic.syncs, 1) << k.traffic.describe();
  const double per_layer = launches_per_layer(k, cfg.model.num_hidden_layers);
  EXPECT_GT(per_layer, 0);
  EXPECT_GT(k.launches, k.layer_launches) << "the embedding, LM head and optimizer launch outside the layers";
  if (v.lora) {
    // A LoRA layer of that step: the base's forward and dgrad GEMMs and kernels as above (no base wgrad),
    // and per term (7) its own small GEMMs (u = x A^T, kept for backward; s u B^T added into the base
    // output's columns in place; du = s dy B, dB, dA, du A) and dropout's masks (forward, backward's
    // recomputed input, the input gradient). Fewer is progress; more is a regression.
    EXPECT_LE(per_layer, 81.0);
  } else if (v.bf16 && !v.checkpointing && v.stage == 0) {
    // What one bf16 layer launches today, as a GPU build would: 12 GEMMs (forward [q; k; v], o,
    // [gate; up], down; each one's dgrad and wgrad), attention forward and backward, two RMSNorms forward
    // (each keeping the residual stream it reads, reading its bf16 weight) and backward (each summing its
    // weight gradient's columns in the same launch), RoPE forward and backward, SwiGLU forward and
    // backward: 22. The residual GEMMs write the bf16 stream rounded, so no layer has a rounding pass.
    // Fewer is progress (issue: <= 20); more is a regression.
    EXPECT_LE(per_layer, 22.0);
  }
  std::printf("[ counts   ] %s: %.1f kernel launches per decoder layer (%lld in all), %lld GEMMs\n", v.name,
              per_layer, static_cast<long long>(k.launches), static_cast<long long>(k.gemm.calls));
}

INSTANTIATE_TEST_SUITE_P(Variants, StepKernelCounts,
                         testing::Values(KernelVariant{"bf16_stage0", 0, true, false},
                                         KernelVariant{"bf16_stage3", 3, true, false},
                                         KernelVariant{"bf16_stage2_checkpointing", 2, true, true},
                                         KernelVariant{"fp32_stage0", 0, false, false},
                                         KernelVariant{"bf16_lora_stage0", 0, true, false, true}),
                         [](const testing::TestParamInfo<KernelVariant>& i) { return std::string(i.param.name); });

// qwZ counts non-finite weights on the device as it quantizes them; the step's read-back reports them.
TEST(StepTraffic, NonFiniteWeightsUnderQwzStillFailTheStep) {
  TrainConfig cfg = tiny_config();
  cfg.zero_stage = 3;
  cfg.zero_quantized_weights = true;
  Trainer tr(cfg, 10, self());
  std::vector<float> w = tr.engine().gather_master();
  w[7] = std::nanf("");
  tr.engine().load_weights(w);
  try {
    tr.step(micro_batches());
    FAIL() << "a NaN weight was quantized without an error";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("ZeRO++ quantization met"), std::string::npos) << what;
    EXPECT_NE(what.find("non-finite values (NaN or Inf)"), std::string::npos) << what;
  }
}

TEST(DeviceTraffic, CountsReadBacksAndHostReductions) {
  View1<float> x("x", 1000);
  Kokkos::deep_copy(x, 2.f);
  View1<double> s("s", 1);
  DeviceTraffic before = device_traffic();
  sum_squares(x, s);  // stays on the device
  EXPECT_EQ(device_traffic().since(before).syncs, 0);
  EXPECT_DOUBLE_EQ(read_scalar(s, "test read"), 4000.0);
  DeviceTraffic d = device_traffic().since(before);
  EXPECT_EQ(d.copies, 1);
  EXPECT_EQ(d.syncs, 1);
  EXPECT_EQ(d.sites.at("copy test read"), 1);
  before = device_traffic();
  EXPECT_DOUBLE_EQ(sum_squares(x), 4000.0);  // the host-returning form: a sync
  EXPECT_EQ(device_traffic().since(before).syncs, 1);
  EXPECT_NE(device_traffic().since(before).describe().find("sum_squares"), std::string::npos);
}

// Waits made one after another at one point drain the device once: one sync, named by the point; a
// wait after the point is counted again.
TEST(DeviceTraffic, WaitsAtOneSyncPointCountOnce) {
  View1<float> x("x", 1000);
  Kokkos::deep_copy(x, 1.f);
  DeviceTraffic before = device_traffic();
  {
    const HostSyncPoint point("step end");
    EXPECT_DOUBLE_EQ(sum_squares(x), 1000.0);
    count_host_sync("collectives");
  }
  DeviceTraffic d = device_traffic().since(before);
  EXPECT_EQ(d.syncs, 1) << d.describe();
  EXPECT_EQ(d.sites.count("sync step end"), 1u) << d.describe();
  EXPECT_EQ(d.sites.count("sync collectives"), 0u) << d.describe();
  before = device_traffic();
  count_host_sync("after the point");
  EXPECT_EQ(device_traffic().since(before).syncs, 1);
}

TEST(DeviceTraffic, EvaluationReadsItsLossBack) {
  Trainer tr(tiny_config(), 10, self());
  const auto batches = micro_batches();
  const DeviceTraffic before = device_traffic();
  const LossSums ls = tr.model().forward_loss(to_model_inputs(batches[0], ByteTokenizer::kVocabSize), tr.engine());
  const DeviceTraffic d = device_traffic().since(before);
  EXPECT_GT(ls.num_targets, 0);
  EXPECT_GE(d.syncs, 2) << "loss and target count read back: " << d.describe();
  EXPECT_EQ(d.uploads, 5);  // ids, positions, seq ids, targets, segment starts
}

TEST(KernelScratch, ReusesItsBufferUntilAskedForMore) {
  install_device_traffic_hooks();
  const auto a = kernel_scratch<float>("test_scratch", 100);
  DeviceTraffic before = device_traffic();
  const auto b = kernel_scratch<float>("test_scratch", 60);
  EXPECT_EQ(a.data(), b.data());
  EXPECT_EQ(b.extent(0), 60u);
  EXPECT_EQ(device_traffic().since(before).allocations, 0);
  const auto c = kernel_scratch<float>("test_scratch", 1000);
  EXPECT_EQ(c.extent(0), 1000u);
  EXPECT_EQ(device_traffic().since(before).allocations, 1);
  const auto other = kernel_scratch<std::int32_t>("test_scratch_other", 10);
  EXPECT_NE(static_cast<void*>(other.data()), static_cast<void*>(c.data()));
}

}  // namespace
}  // namespace shardft
