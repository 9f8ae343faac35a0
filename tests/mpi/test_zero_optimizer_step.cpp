// The optimizer step's fused paths over the job's ranks, at every stage: the clip folded into the one
// AdamW launch equals clipping the gradient in place first (master weights, moments and the gradient any
// later reader sees, bit for bit), the one-launch refresh leaves every compute weight equal to its master
// weight in the compute dtype, and the next step starts from a zero gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "kernels/bf16.hpp"
#include "kernels/fp16.hpp"
#include "parallel/zero_engine.hpp"
#include "config/recipe_sections.hpp"

namespace shardft {
namespace {

ModelConfig small_model() {
  ModelConfig m;
  m.vocab_size = 96;
  m.hidden_size = 32;
  m.num_hidden_layers = 2;
  m.num_attention_heads = 4;
  m.num_key_value_heads = 2;
  m.intermediate_size = 48;
  m.qkv_bias = true;  // biases and norms take no weight decay: runs of both rules
  return m;
}

std::vector<float> random_values(std::size_t n, unsigned seed, float scale) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// One micro-batch whose gradient (before the reduction over ranks) is `g`, layout order, block by block
// in backward order as the model hands gradients over.
void feed_gradient(ZeroEngine& eng, const ParamLayout& layout, const std::vector<float>& g) {
  eng.begin_step();
  eng.begin_micro_batch({0, 1});
  for (int b = static_cast<int>(layout.blocks().size()) - 1; b >= 0; --b) {
    for (const int p : layout.blocks()[b].params) {
      const Unmanaged1<float> d = eng.grad(p);
      if (d.extent(0) == 0) continue;
      auto h = Kokkos::create_mirror_view(d);
      for (std::size_t i = 0; i < d.extent(0); ++i) h(i) = g[layout.offset(p) + i];
      Kokkos::deep_copy(d, h);
    }
    eng.block_done(b);
  }
  eng.end_micro_batch();
}

void expect_bitwise_equal(const std::string& what, const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << what << " " << i;
}

double read(const View1<double>& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return h(0);
}

ZeroConfig zero_config(int stage, ComputeDtype dtype) {
  ZeroConfig zc;
  zc.stage = stage;
  zc.dtype = dtype;
  zc.weight_decay = 0.1;
  return zc;
}

// Engine a reads the clipped gradient between clip_grad_norm and optimizer_step (so the clip is applied
// in place, the old order); engine b goes straight to the step (the clip folded into AdamW) and reads the
// gradient after it. Both must hold the same bits everywhere, and the clipped gradient must be the
// reduced gradient times the float factor clip_grad_norm defines.
TEST(ZeroOptimizerStep, FoldedClipEqualsClippingInPlace) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  const ParamLayout layout(small_model());
  const auto w0 = random_values(layout.total_numel(), 1, 0.1f);
  for (int stage = 0; stage <= 3; ++stage) {
    for (const double max_norm : {0.05, 1e9, 0.0}) {  // clipping, below the norm, clipping off
      SCOPED_TRACE("stage " + std::to_string(stage) + " max_norm " + std::to_string(max_norm));
      ZeroEngine a(layout, zero_config(stage, ComputeDtype::bf16), ParallelPlan::over(world));
      ZeroEngine b(layout, zero_config(stage, ComputeDtype::bf16), ParallelPlan::over(world));
      a.load_weights(w0);
      b.load_weights(w0);
      View1<double> na("norm_sq_a", 1), nb("norm_sq_b", 1);
      for (int step = 0; step < 3; ++step) {
        const auto g = random_values(layout.total_numel(), 10 + step + 100 * world.rank(), 0.02f);
        feed_gradient(a, layout, g);
        feed_gradient(b, layout, g);
        const std::vector<float> reduced = a.gather_grads();
        a.clip_grad_norm(max_norm, na);
        const std::vector<float> clipped = a.gather_grads();
        a.optimizer_step(1e-2);
        b.clip_grad_norm(max_norm, nb);
        b.optimizer_step(1e-2);
        const double norm_sq = read(na);
        EXPECT_EQ(norm_sq, read(nb));
        const double norm = std::sqrt(norm_sq);
        const float factor = max_norm > 0 && norm > max_norm ? static_cast<float>(max_norm / (norm + 1e-6)) : 1.f;
        if (max_norm == 0.05) {
          ASSERT_LT(factor, 1.f);  // the test clips
        }
        std::vector<float> want(reduced.size());
        for (std::size_t i = 0; i < reduced.size(); ++i) want[i] = reduced[i] * factor;
        expect_bitwise_equal("clipped gradient", clipped, want);
        expect_bitwise_equal("gradient after the step", b.gather_grads(), clipped);
        expect_bitwise_equal("master weights", b.gather_master(), a.gather_master());
      }
      std::vector<float> ma(a.exp_avg().extent(0)), mb(ma.size()), va(ma.size()), vb(ma.size());
      Kokkos::deep_copy(Kokkos::View<float*, HostSpace, Kokkos::MemoryUnmanaged>(ma.data(), ma.size()), a.exp_avg());
      Kokkos::deep_copy(Kokkos::View<float*, HostSpace, Kokkos::MemoryUnmanaged>(mb.data(), mb.size()), b.exp_avg());
      Kokkos::deep_copy(Kokkos::View<float*, HostSpace, Kokkos::MemoryUnmanaged>(va.data(), va.size()), a.exp_avg_sq());
      Kokkos::deep_copy(Kokkos::View<float*, HostSpace, Kokkos::MemoryUnmanaged>(vb.data(), vb.size()), b.exp_avg_sq());
      expect_bitwise_equal("exp_avg", ma, mb);
      expect_bitwise_equal("exp_avg_sq", va, vb);
    }
  }
}

float rounded(float x, ComputeDtype dtype) {
  if (dtype == ComputeDtype::bf16) return round_to_bf16(x);
  if (dtype == ComputeDtype::fp16) return round_to_fp16(x);
  return x;
}

// After an update the compute weights every block reads are its master weights in the compute dtype;
// at stages 1-2 the refresh writes each unit's shard at its place in the full buffer (one launch), then
// gathers the others'. And the next step starts from a zero gradient.
TEST(ZeroOptimizerStep, RefreshedWeightsAreTheMastersInTheComputeDtype) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  const ParamLayout layout(small_model());
  for (int stage = 0; stage <= 3; ++stage) {
    for (const ComputeDtype dtype : {ComputeDtype::fp32, ComputeDtype::bf16, ComputeDtype::fp16}) {
      SCOPED_TRACE("stage " + std::to_string(stage) + " dtype " + std::to_string(static_cast<int>(dtype)));
      ZeroEngine eng(layout, zero_config(stage, dtype), ParallelPlan::over(world));
      eng.load_weights(random_values(layout.total_numel(), 2, 0.1f));
      feed_gradient(eng, layout, random_values(layout.total_numel(), 20 + world.rank(), 0.02f));
      View1<double> norm_sq("norm_sq", 1);
      eng.clip_grad_norm(1.0, norm_sq);
      eng.optimizer_step(1e-2);
      const std::vector<float> master = eng.gather_master();
      for (int b = 0; b < static_cast<int>(layout.blocks().size()); ++b) {
        eng.acquire(b, Pass::forward);
        for (const int p : layout.blocks()[b].params) {
          auto w = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), eng.weight(p));
          for (std::size_t i = 0; i < w.extent(0); ++i) {
            const float want = rounded(master[layout.offset(p) + i], dtype);
            ASSERT_EQ(std::memcmp(&w(i), &want, sizeof(float)), 0) << layout.params()[p].name << " " << i;
          }
        }
        eng.release(b, Pass::forward);
      }
      // A step in which the model hands over no gradient at all: begin_step alone must have zeroed it.
      eng.begin_step();
      eng.begin_micro_batch({0, 1});
      eng.end_micro_batch();
      for (const float g : eng.gather_grads()) ASSERT_EQ(g, 0.f);
    }
  }
}

}  // namespace
}  // namespace shardft
