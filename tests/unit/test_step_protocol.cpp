// The step's phases (parallel/zero/step_protocol.hpp): entered by the calls that begin them, in order, and
// a call out of its phase refused with a message naming the call and the phase, by the protocol alone
// and through the sharding engine at every stage.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "comm/self_communicator.hpp"
#include "parallel/zero/step_protocol.hpp"
#include "parallel/zero_engine.hpp"

namespace shardft {
namespace {

template <class Fn>
std::string logic_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return "";
}

TEST(StepProtocol, WalksThePhasesOfAStep) {
  StepProtocol p;
  EXPECT_EQ(p.phase(), StepPhase::idle);
  p.begin_step();
  EXPECT_EQ(p.phase(), StepPhase::accumulating);
  for (int i = 0; i < 3; ++i) {
    p.begin_micro_batch({i, 3});
    EXPECT_EQ(p.phase(), StepPhase::micro_batch);
    EXPECT_EQ(p.micro_batch().last(), i == 2);
    p.end_micro_batch();
    EXPECT_EQ(p.phase(), i == 2 ? StepPhase::reduced : StepPhase::accumulating);
  }
  p.end_step();
  EXPECT_EQ(p.phase(), StepPhase::idle);
  p.begin_step();  // a second step starts at micro-batch 0 again
  p.begin_micro_batch({0, 1});
  p.end_micro_batch();
  EXPECT_EQ(p.phase(), StepPhase::reduced);
  p.begin_step();  // a step that took no optimizer step (fp16 overflow) is followed by the next
  EXPECT_EQ(p.phase(), StepPhase::accumulating);
}

TEST(StepProtocol, RefusesCallsOutOfOrder) {
  {
    StepProtocol p;
    const std::string e = logic_error_of([&] { p.begin_micro_batch({0, 1}); });
    EXPECT_NE(e.find("begin_micro_batch called in step phase idle"), std::string::npos) << e;
  }
  {
    StepProtocol p;
    p.begin_step();
    const std::string e = logic_error_of([&] { p.begin_micro_batch({1, 2}); });
    EXPECT_NE(e.find("micro-batch 1 of 2 where micro-batch 0 of 2 comes next"), std::string::npos) << e;
  }
  {
    StepProtocol p;
    p.begin_step();
    p.begin_micro_batch({0, 2});
    p.end_micro_batch();
    const std::string e = logic_error_of([&] { p.begin_micro_batch({1, 3}); });
    EXPECT_NE(e.find("micro-batch 1 of 3 where micro-batch 1 of 2 comes next"), std::string::npos) << e;
    EXPECT_NE(logic_error_of([&] { p.end_step(); }).find("optimizer_step called in step phase accumulating"),
              std::string::npos);
  }
  {
    StepProtocol p;
    p.begin_step();
    EXPECT_NE(logic_error_of([&] { p.begin_micro_batch({2, 2}); }).find("out of range"), std::string::npos);
    EXPECT_NE(logic_error_of([&] { p.end_micro_batch(); }).find("end_micro_batch called in step phase accumulating"),
              std::string::npos);
  }
}

ModelConfig tiny_model() {
  ModelConfig m;
  m.vocab_size = 32;
  m.hidden_size = 16;
  m.num_hidden_layers = 1;
  m.num_attention_heads = 2;
  m.num_key_value_heads = 1;
  m.intermediate_size = 24;
  return m;
}

// The engine keeps the phase itself: a gradient read or an update before the step's gradient is
// complete, or a block handed over outside a micro-batch, is refused before it reduces or updates.
TEST(StepProtocol, TheEngineRefusesAnUpdateBeforeTheGradientIsReduced) {
  SelfCommunicator self;
  const ParamLayout layout(tiny_model());
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    ZeroConfig zc;
    zc.stage = stage;
    ZeroEngine eng(layout, zc, ParallelPlan::over(self));
    View1<double> norm_sq("norm_sq", 1);
    EXPECT_NE(logic_error_of([&] { eng.optimizer_step(1e-3); }).find("optimizer_step called in step phase idle"),
              std::string::npos);
    eng.begin_step();
    eng.begin_micro_batch({0, 2});
    eng.block_done(layout.head_block());
    eng.end_micro_batch();
    EXPECT_EQ(eng.step_phase(), StepPhase::accumulating);
    EXPECT_NE(logic_error_of([&] { eng.clip_grad_norm(1.0, norm_sq); }).find("clip_grad_norm called in step phase accumulating"),
              std::string::npos);
    EXPECT_NE(logic_error_of([&] { eng.block_done(0); }).find("block_done called in step phase accumulating"),
              std::string::npos);
    eng.begin_micro_batch({1, 2});
    eng.end_micro_batch();
    EXPECT_EQ(eng.step_phase(), StepPhase::reduced);
    eng.clip_grad_norm(1.0, norm_sq);
    eng.optimizer_step(1e-3);
    EXPECT_EQ(eng.step_phase(), StepPhase::idle);
    EXPECT_EQ(eng.steps_taken(), 1);
  }
}

// The model names the pass at each acquire, and stage 3 prefetches in its direction: a forward-only pass
// (evaluation) that ends at the head gathers nothing beyond it, while the head acquired for backward
// (a training step, whose backward starts there) prefetches the last layer.
TEST(StepProtocol, ThePassDecidesWhichWayStage3Prefetches) {
  SelfCommunicator self;
  const ParamLayout layout(tiny_model());
  ZeroConfig zc;
  zc.stage = 3;
  ZeroEngine eng(layout, zc, ParallelPlan::over(self));
  const int head = layout.head_block();
  auto pass = [&](Pass at_head) {
    const std::int64_t before = eng.buffer_pool().takes();
    for (int b = 0; b < head; ++b) {
      eng.acquire(b, Pass::forward);
      eng.release(b, Pass::forward);
    }
    eng.acquire(head, at_head);
    eng.release(head, at_head);
    return eng.buffer_pool().takes() - before;
  };
  const std::int64_t forward_only = pass(Pass::forward);
  EXPECT_EQ(forward_only, pass(Pass::forward)) << "a forward-only pass leaves nothing gathered for the next";
  EXPECT_EQ(pass(Pass::backward), forward_only + static_cast<std::int64_t>(eng.partition().units_of_block(head - 1).size()))
      << "the head acquired for backward prefetches the last layer's units";
}

}  // namespace
}  // namespace shardft
