// A bf16 step's LoRA term (model/linear.hpp): u = x A^T and du = s dy B are written in bf16 (rounded once,
// as autocast hands on lora_A's output and the gradient at it), so is dropout's output, and dB and du read
// the layer's bf16 gradient operand (the gradient at lora_B's output): every LoRA product is bf16 x bf16,
// and nothing is widened to fp32 on a GPU, as the GEMM counters of a CPU build report the GPU path. du is
// made once, with the layer's gradient operand, for both halves of backward.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "finite_difference.hpp"
#include "kernels/dropout_mask.hpp"
#include "kernels/gemm_counters.hpp"
#include "model/linear.hpp"
#include "tests/common/bf16_values.hpp"
#include "tests/common/device_build.hpp"

namespace shardft {
namespace {

using namespace kernel_test;
using testing_util::rounded_to_bf16;
using testing_util::to_device_bf16;
using testing_util::widened;

TEST(LoraBf16Gemms, EveryProductIsBf16AndNothingIsWidened) {
  const int N = 10, in = 16, out = 12, r = 4;
  const float scale = 2.f;
  const auto w = rounded_to_bf16(random_vector(out * in, 471)), a = rounded_to_bf16(random_vector(r * in, 472));
  const auto b = rounded_to_bf16(random_vector(out * r, 473)), x = rounded_to_bf16(random_vector(N * in, 474));
  const auto dy = random_vector(N * out, 475);
  const View2<bf16> w16 = to_device_bf16(w, out, in, "w"), a16 = to_device_bf16(a, r, in, "a");
  const View2<bf16> b16 = to_device_bf16(b, out, r, "b"), x16 = to_device_bf16(x, N, in, "x");
  Linear layer(Unmanaged2<const bf16>(w16), {});
  layer.add_lora(LoraTerm{Unmanaged2<const bf16>(a16), Unmanaged2<const bf16>(b16), scale, 0, {}});
  const GemmOperand xin = Unmanaged2<const bf16>(x16);

  View2<float> y("y", N, out);
  const GemmCounters before_forward = gemm_counters();
  layer.forward(xin, y);
  const GemmCounters forward = gemm_counters().since(before_forward);
  EXPECT_EQ(forward.calls, 3);  // x W^T, u = x A^T, y += s u B^T
  EXPECT_EQ(forward.widened_elements, 0);
  EXPECT_DOUBLE_EQ(forward.tensor_core_share(), 1.0);

  const auto dyd = to_device(dy, N, out, "dy");
  View2<float> dw("dw", out, in), da("da", r, in), db("db", out, r), dx("dx", N, in);
  LinearGrads grads{dw, {}, {LoraGrads{da, db}, LoraGrads{}}};
  grads.overwrite_weight = true;
  const GemmCounters before_backward = gemm_counters();
  const LinearGrad g = layer.grad_operand(dyd);  // makes du = s dy B, which both halves read
  layer.backward_weight(xin, g, grads);
  layer.backward_input(g, dx, 0.f);
  const GemmCounters backward = gemm_counters().since(before_backward);
  EXPECT_EQ(backward.calls, 7);  // du; dW = dy^T x; u again, dB = s dy^T u, dA = du^T x; dx = dy W, dx += du A
  EXPECT_EQ(backward.widened_elements, 0);
  EXPECT_DOUBLE_EQ(backward.tensor_core_share(), 1.0);

  // dA = du^T x with du = s dy B, dy rounded to bf16 (the layer's gradient operand) and du rounded once
  // (the fp32 sum, then the rounding).
  const auto dy16 = rounded_to_bf16(dy);
  const auto da_host = to_host(da);
  for (int k = 0; k < r; ++k) {
    for (int j = 0; j < in; ++j) {
      double want = 0;
      for (int n = 0; n < N; ++n) {
        float du = 0.f;
        for (int o = 0; o < out; ++o) du += dy16[n * out + o] * b[o * r + k];
        want += static_cast<double>(round_to_bf16(scale * du)) * x[n * in + j];
      }
      // A sum on a rounding boundary may land one bf16 ulp of du apart on a GPU (another summation order).
      EXPECT_NEAR(da_host[k * in + j], want, 1e-2 * (1.0 + std::abs(want))) << k << "," << j;
    }
  }
}

// A LoRA layer of a bf16 step writing bf16 (the packed q/k/v and [gate | up] projections, the residual
// layers, their dgrads), with a term on each half of its output as the fused [gate | up] layer has, one
// of them under dropout: y = round(round(x W^T) + s u B^T) per half, what forward()'s fp32 output rounded
// gives; dx = round(round(dy W) + du A) per term (through the mask, du A first rounded to bf16 as lora_A's
// backward under autocast hands it to dropout's). Every product bf16 x bf16.
TEST(LoraBf16Gemms, LayerWritingBf16RoundsTheBaseThenAddsEachTerm) {
  const int N = 10, in = 16, out = 12, half = 6, r = 4;
  const float p = 0.25f, scale[2] = {0.5f, 2.f};
  const auto w = rounded_to_bf16(random_vector(out * in, 491)), x = rounded_to_bf16(random_vector(N * in, 492));
  const View2<bf16> w16 = to_device_bf16(w, out, in, "w"), x16 = to_device_bf16(x, N, in, "x");
  std::vector<float> a[2], b[2];
  View2<bf16> a16[2], b16[2];
  Linear layer(Unmanaged2<const bf16>(w16), {});
  for (int t = 0; t < 2; ++t) {
    a[t] = rounded_to_bf16(random_vector(r * in, 493 + t));
    b[t] = rounded_to_bf16(random_vector(half * r, 495 + t));
    a16[t] = to_device_bf16(a[t], r, in, "a");
    b16[t] = to_device_bf16(b[t], half, r, "b");
    layer.add_lora(LoraTerm{Unmanaged2<const bf16>(a16[t]), Unmanaged2<const bf16>(b16[t]), scale[t], t * half, {}});
  }
  std::vector<std::uint64_t> key_host(N);
  for (int n = 0; n < N; ++n) key_host[n] = 1000 + n;
  const View1<std::uint64_t> keys = to_device(key_host);
  const DropoutMask mask{p, dropout_stream(3, 1, 0, 5), keys};
  layer.set_lora_dropout(0, mask);
  View2<float> keep_d("keep", N, in);
  dropout_keep(mask, keep_d);
  const auto keep = to_host(keep_d);
  const GemmOperand xin = Unmanaged2<const bf16>(x16);

  const View2<bf16> y16("y16", N, out);
  const GemmCounters before = gemm_counters();
  layer.forward_bf16(xin, y16);
  const GemmCounters forward = gemm_counters().since(before);
  EXPECT_EQ(forward.calls, 5);  // x W^T; per term u = x_t A^T, s u B^T
  EXPECT_EQ(forward.widened_elements, 0);
  View2<float> y32("y32", N, out);
  layer.forward(xin, y32);
  const auto got = widened(y16), staged = to_host(y32);

  const auto dy = rounded_to_bf16(random_vector(N * out, 497));
  const LinearGrad g = layer.grad_operand(to_device(dy, N, out, "dy"));
  const View2<bf16> dx16("dx16", N, in);
  ASSERT_TRUE(dgrad_writes_bf16(layer)) << "the norm before it reads a bf16 gradient";
  layer.backward_input_bf16(g, dx16);
  const auto dx = widened(dx16);

  const double tol = std::ldexp(1.0, -7);  // a bf16 ulp: the host's sums and ours may round apart
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < out; ++o) {
      const int t = o / half;
      float base = 0.f, v = 0.f;
      for (int k = 0; k < in; ++k) base += x[n * in + k] * w[o * in + k];
      for (int j = 0; j < r; ++j) {
        float u = 0.f;
        for (int k = 0; k < in; ++k) {
          const float xk = t == 0 ? round_to_bf16(keep[n * in + k] != 0.f ? x[n * in + k] / (1.f - p) : 0.f) : x[n * in + k];
          u += xk * a[t][j * in + k];
        }
        v += round_to_bf16(u) * b[t][(o - t * half) * r + j];
      }
      const float want = round_to_bf16(round_to_bf16(base) + scale[t] * v);
      const std::size_t i = static_cast<std::size_t>(n * out + o);
      EXPECT_NEAR(got[i], want, tol * (1.0 + std::abs(want))) << n << "," << o;
      // the same GEMMs on the host: exactly; a GPU's bf16 output and its fp32 one may sum apart
      EXPECT_NEAR(got[i], round_to_bf16(staged[i]), testing_util::host_or_device_tol(0.0, tol * (1.0 + std::abs(want))))
          << "staged " << n << "," << o;
    }
    for (int k = 0; k < in; ++k) {
      float base = 0.f, lora[2] = {0.f, 0.f};
      for (int o = 0; o < out; ++o) base += dy[n * out + o] * w[o * in + k];
      for (int t = 0; t < 2; ++t) {
        for (int j = 0; j < r; ++j) {
          float du = 0.f;
          for (int o = 0; o < half; ++o) du += dy[n * out + t * half + o] * b[t][o * r + j];
          lora[t] += round_to_bf16(scale[t] * du) * a[t][j * in + k];
        }
      }
      const float dropped = keep[n * in + k] != 0.f ? round_to_bf16(lora[0]) / (1.f - p) : 0.f;
      const float want = round_to_bf16(round_to_bf16(round_to_bf16(base) + dropped) + lora[1]);
      EXPECT_NEAR(dx[n * in + k], want, 2 * tol * (1.0 + std::abs(want))) << "dx " << n << "," << k;
    }
  }
}

// LoRA's gradients under a sharding engine that hands them out stale (GradSink::grad_to_write): marked
// overwrite, dA and dB replace what the buffers held (beta 0, no zeroing launch) and equal the sums added
// into zeroed buffers, bit for bit, stale NaNs included.
TEST(LoraBf16Gemms, GradientsMarkedOverwriteReplaceStaleValues) {
  const int N = 9, in = 16, out = 24, r = 4;
  const auto w = rounded_to_bf16(random_vector(out * in, 481)), a = rounded_to_bf16(random_vector(r * in, 482));
  const auto b = rounded_to_bf16(random_vector(out / 2 * r, 483)), x = rounded_to_bf16(random_vector(N * in, 484));
  const View2<bf16> w16 = to_device_bf16(w, out, in, "w"), a16 = to_device_bf16(a, r, in, "a");
  const View2<bf16> b16 = to_device_bf16(b, out / 2, r, "b"), x16 = to_device_bf16(x, N, in, "x");
  Linear layer(Unmanaged2<const bf16>(w16), {});
  layer.add_lora(LoraTerm{Unmanaged2<const bf16>(a16), Unmanaged2<const bf16>(b16), 0.5f, out / 2, {}});
  const LinearGrad g = layer.grad_operand(to_device(random_vector(N * out, 485), N, out, "dy"));

  View2<float> da_added("da_added", r, in), db_added("db_added", out / 2, r);
  layer.backward_weight(Unmanaged2<const bf16>(x16), g, LinearGrads{{}, {}, {LoraGrads{da_added, db_added}, LoraGrads{}}});
  View2<float> da_written("da_written", r, in), db_written("db_written", out / 2, r);
  Kokkos::deep_copy(da_written, std::nanf(""));
  Kokkos::deep_copy(db_written, std::nanf(""));
  LoraGrads written{da_written, db_written};
  written.overwrite_a = written.overwrite_b = true;
  layer.backward_weight(Unmanaged2<const bf16>(x16), g, LinearGrads{{}, {}, {written, LoraGrads{}}});
  EXPECT_EQ(to_host(da_written), to_host(da_added));
  EXPECT_EQ(to_host(db_written), to_host(db_added));
}

// u = x A^T kept by forward (LoraKept) for backward's dB = s dy^T u: the same gradients bit for bit as
// backward multiplying x by A again, one GEMM fewer per term, for a term under dropout and one without
// (bf16 and fp32 compute). A kept u is read once and only for the x forward read: a second backward, or
// one on another input, recomputes it.
TEST(LoraBf16Gemms, KeptUGivesTheRecomputedGradientsWithOneGemmFewerPerTerm) {
  const int N = 9, in = 16, out = 24, r = 4;
  const auto w = rounded_to_bf16(random_vector(out * in, 491)), a0 = rounded_to_bf16(random_vector(r * in, 492));
  const auto a1 = rounded_to_bf16(random_vector(r * in, 493)), b0 = rounded_to_bf16(random_vector(out / 2 * r, 494));
  const auto b1 = rounded_to_bf16(random_vector(out / 2 * r, 495));
  const auto x = rounded_to_bf16(random_vector(N * in, 496)), x2 = rounded_to_bf16(random_vector(N * in, 497));
  for (const bool bf16_compute : {true, false}) {
    SCOPED_TRACE(bf16_compute ? "bf16" : "fp32");
    const View2<bf16> w16 = to_device_bf16(w, out, in, "w"), x16 = to_device_bf16(x, N, in, "x");
    const View2<bf16> x2_16 = to_device_bf16(x2, N, in, "x2");
    const View2<bf16> a16[2] = {to_device_bf16(a0, r, in, "a0"), to_device_bf16(a1, r, in, "a1")};
    const View2<bf16> b16[2] = {to_device_bf16(b0, out / 2, r, "b0"), to_device_bf16(b1, out / 2, r, "b1")};
    const View2<float> w32 = to_device(w, out, in, "w32"), x32 = to_device(x, N, in, "x32");
    const View2<float> x2_32 = to_device(x2, N, in, "x2_32");
    const View2<float> a32[2] = {to_device(a0, r, in, "a0_32"), to_device(a1, r, in, "a1_32")};
    const View2<float> b32[2] = {to_device(b0, out / 2, r, "b0_32"), to_device(b1, out / 2, r, "b1_32")};
    Linear layer = bf16_compute ? Linear(Unmanaged2<const bf16>(w16), {})
                                : Linear(Unmanaged2<const float>(w32), {}, ComputeDtype::fp32);
    for (int t = 0; t < 2; ++t) {
      const GemmOperand at = bf16_compute ? GemmOperand(Unmanaged2<const bf16>(a16[t])) : GemmOperand(Unmanaged2<const float>(a32[t]));
      const GemmOperand bt = bf16_compute ? GemmOperand(Unmanaged2<const bf16>(b16[t])) : GemmOperand(Unmanaged2<const float>(b32[t]));
      layer.add_lora(LoraTerm{at, bt, 0.5f + t, t * out / 2, {}});
    }
    std::vector<std::uint64_t> key_host(N);
    for (int n = 0; n < N; ++n) key_host[n] = 2000 + n;
    const View1<std::uint64_t> keys = to_device(key_host);
    layer.set_lora_dropout(1, DropoutMask{0.25f, dropout_stream(5, 2, 0, 3), keys});
    const GemmOperand xin = bf16_compute ? GemmOperand(Unmanaged2<const bf16>(x16)) : GemmOperand(Unmanaged2<const float>(x32));
    const GemmOperand x2in =
        bf16_compute ? GemmOperand(Unmanaged2<const bf16>(x2_16)) : GemmOperand(Unmanaged2<const float>(x2_32));
    const View2<float> dy = to_device(random_vector(N * out, 498), N, out, "dy");  // g reads it in fp32 compute
    const LinearGrad g = layer.grad_operand(dy);
    struct Grads {
      View2<float> a[2], b[2];
      LinearGrads of() const { return LinearGrads{{}, {}, {LoraGrads{a[0], b[0]}, LoraGrads{a[1], b[1]}}}; }
    };
    auto fresh = [&]() {
      return Grads{{View2<float>("da0", r, in), View2<float>("da1", r, in)},
                   {View2<float>("db0", out / 2, r), View2<float>("db1", out / 2, r)}};
    };
    auto expect_same = [&](const Grads& got, const Grads& want, const char* what) {
      SCOPED_TRACE(what);
      for (int t = 0; t < 2; ++t) {
        EXPECT_EQ(to_host(got.a[t]), to_host(want.a[t])) << "dA of term " << t;
        EXPECT_EQ(to_host(got.b[t]), to_host(want.b[t])) << "dB of term " << t;
      }
    };
    View2<float> y("y", N, out);
    const Grads recomputed = fresh();
    layer.forward(xin, y);
    layer.backward_weight(xin, g, recomputed.of());

    LoraKept kept("kept_u");
    layer.forward(xin, y, &kept);
    const Grads from_kept = fresh();
    const GemmCounters before = gemm_counters();
    layer.backward_weight(xin, g, from_kept.of(), 1.f, &kept);
    EXPECT_EQ(gemm_counters().since(before).calls, 4);  // dB and dA per term; recomputing u adds one each
    expect_same(from_kept, recomputed, "u kept by forward");

    const Grads again = fresh();  // read once: the second backward recomputes, with the same result
    const GemmCounters before_again = gemm_counters();
    layer.backward_weight(xin, g, again.of(), 1.f, &kept);
    EXPECT_EQ(gemm_counters().since(before_again).calls, 6);
    expect_same(again, recomputed, "a second backward");

    layer.forward(x2in, y, &kept);  // u of x2 kept: a backward on x recomputes x's
    const Grads other_input = fresh();
    const GemmCounters before_other = gemm_counters();
    layer.backward_weight(xin, g, other_input.of(), 1.f, &kept);
    EXPECT_EQ(gemm_counters().since(before_other).calls, 6);
    expect_same(other_input, recomputed, "u kept of another input");
  }
}

}  // namespace
}  // namespace shardft
