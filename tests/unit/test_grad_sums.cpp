// A gradient sum starts stale and is never zeroed whole (parallel/zero/grad_sum_state.hpp): a buffer
// claimed for an addition is zeroed first, one claimed for a write is handed over to be overwritten,
// and what no gradient reached is zeroed when the unit is settled. Here the buffers start as NaN, so
// any stale value that leaks into a sum shows.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "comm/self_communicator.hpp"
#include "kernels/elementwise.hpp"
#include "parallel/zero/grad_reducer_variants.hpp"
#include "parallel/zero/grad_sum_state.hpp"
#include "parallel/zero_engine.hpp"

namespace shardft {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

ModelConfig tiny_model() {
  ModelConfig m;
  m.vocab_size = 32;
  m.hidden_size = 16;
  m.num_hidden_layers = 2;
  m.num_attention_heads = 2;
  m.num_key_value_heads = 1;
  m.intermediate_size = 24;
  return m;
}

std::vector<float> to_host(Unmanaged1<const float> v) {
  std::vector<float> out(v.extent(0));
  Kokkos::deep_copy(Kokkos::View<float*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(out.data(), out.size()), v);
  return out;
}

// The model's two ways of filling a claimed buffer: written where it is stale, added into otherwise.
void contribute(const GradWrite& g, float value) {
  if (g.overwrite) {
    Kokkos::deep_copy(ExecSpace(), g.values, value);
    return;
  }
  View1<float> term("term", g.values.extent(0));
  Kokkos::deep_copy(term, value);
  add_inplace(g.values, term);
}

TEST(GradSumState, ZeroesWhatIsAddedIntoAndWhatNoGradientReached) {
  const ParamLayout layout(tiny_model());
  const FlatPartition part(layout, 3);  // padded units
  View1<float> full("full", part.full_numel());
  Kokkos::deep_copy(full, kNaN);
  GradSumState sums(part);
  sums.start();
  const FlatUnit& u = part.units()[1];  // the first layer
  ASSERT_GE(u.params.size(), 3u);
  ASSERT_GT(u.padded, u.numel);
  auto slice = [&](int param) { return full_unit_slice(part, full, param); };
  const int added = u.params[2], written = u.params[0];  // u.params[1] lies between: a gap to settle
  const GradWrite a = sums.claim(added, slice(added), GradUse::add);
  EXPECT_FALSE(a.overwrite);
  for (float x : to_host(a.values)) EXPECT_EQ(x, 0.f) << "an addition's buffer is zeroed first";
  contribute(a, 2.f);
  EXPECT_FALSE(sums.claim(added, slice(added), GradUse::add).overwrite);
  for (float x : to_host(a.values)) EXPECT_EQ(x, 2.f) << "a second claim does not zero it again";
  const GradWrite w = sums.claim(written, slice(written), GradUse::write);
  EXPECT_TRUE(w.overwrite);
  for (float x : to_host(w.values)) EXPECT_TRUE(std::isnan(x)) << "a write's buffer is handed over as it was";
  contribute(w, 3.f);
  EXPECT_FALSE(sums.claim(written, slice(written), GradUse::write).overwrite) << "reached: the next write adds";
  sums.settle(1, full.data() + u.full_offset);
  const std::vector<float> unit = to_host(Unmanaged1<const float>(full.data() + u.full_offset, u.padded));
  for (std::size_t i = 0; i < u.params.size(); ++i) {
    const float want = u.params[i] == added ? 2.f : u.params[i] == written ? 3.f : 0.f;
    for (std::int64_t e = 0; e < part.numel_of(u.params[i]); ++e) {
      ASSERT_EQ(unit[u.param_offset[i] + e], want) << "parameter " << u.params[i] << " element " << e;
    }
  }
  for (std::int64_t e = u.numel; e < u.padded; ++e) ASSERT_EQ(unit[e], 0.f) << "padding element " << e;
  // A new sum: everything is stale again.
  sums.start();
  EXPECT_TRUE(sums.claim(written, slice(written), GradUse::write).overwrite);
  sums.start_unit(1);
  EXPECT_TRUE(sums.claim(written, slice(written), GradUse::write).overwrite);
}

// One micro-batch through the engine, backward's block order: way(param) says whether each parameter's
// gradient is written (0), added into (1) or not reached (2).
template <class Way>
void run_micro_batch(ZeroEngine& eng, MicroBatch mb, float value, const Way& way) {
  const FlatPartition& part = eng.partition();
  eng.begin_micro_batch(mb);
  for (int block = part.layout().head_block(); block >= 0; --block) {
    for (int p : part.units()[block].params) {
      if (way(p) == 0) contribute(eng.grad_to_write(p), value);
      if (way(p) == 1) contribute({eng.grad(p), false}, value);
    }
    eng.block_done(block);
  }
  eng.end_micro_batch();
}

// Through the engine at every stage: a step whose gradient is all NaN (scaled by NaN after its
// reduction, padding included) is followed by a step of two micro-batches in which each parameter is
// written, added into, or not reached at all. The reduced gradient holds exactly the second step's
// contributions, zero where none came, and its norm is finite. Then, after NaN again, a step in which
// no gradient reaches a whole unit (the first layer's), so no reduction writes its shard: it reads zero.
TEST(GradSumState, NoStaleGradientLeaksIntoTheNextStepAtAnyStage) {
  SelfCommunicator self;
  const ParamLayout layout(tiny_model());
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    ZeroConfig zc;
    zc.stage = stage;
    ZeroEngine eng(layout, zc, ParallelPlan::over(self));
    // A step of two micro-batches after an all-NaN one; each reached parameter's gradient sums to 0.75.
    const auto stale_then_step = [&](const auto& way) {
      eng.scale_grads(kNaN);  // the whole reduced gradient NaN: the stale state of the next step
      eng.begin_step();
      run_micro_batch(eng, {0, 2}, 0.5f, way);
      run_micro_batch(eng, {1, 2}, 0.25f, way);
      const std::vector<float> g = eng.gather_grads();
      double want_norm_sq = 0;
      for (int p = 0; p < static_cast<int>(layout.params().size()); ++p) {
        const float want = way(p) == 2 ? 0.f : 0.75f;
        for (std::int64_t e = 0; e < layout.params()[p].numel(); ++e) {
          EXPECT_EQ(g[layout.offset(p) + e], want) << layout.params()[p].name << " element " << e;
          if (g[layout.offset(p) + e] != want) return;
        }
        want_norm_sq += static_cast<double>(want) * want * layout.params()[p].numel();
      }
      View1<double> norm_sq("norm_sq", 1);
      eng.clip_grad_norm(0.0, norm_sq);
      auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), norm_sq);
      EXPECT_DOUBLE_EQ(host(0), want_norm_sq) << "the padding holds no stale value";
    };
    eng.begin_step();
    run_micro_batch(eng, {0, 1}, 1.f, [](int) { return 1; });
    stale_then_step([](int p) { return p % 3; });
    const FlatPartition& part = eng.partition();
    stale_then_step([&](int p) { return part.unit_of(p) == 1 ? 2 : 1; });
  }
}

}  // namespace
}  // namespace shardft
