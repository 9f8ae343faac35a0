// Every kernel family, forward and backward, at the default model's shapes: N = 384 tokens
// (16 samples x 24), hidden d = 128, 4 heads / 2 kv heads of head_dim 32, intermediate 384, vocab 272.
//
// Memory-bound kernels report "bytes_per_second": the compulsory traffic of one call, each operand
// counted once per read and once per write (a read-modify-write counts twice), in fp32 / int32.
// Attention reports "GFLOPS" over the causal work it really does (key j <= query i):
//   forward  per (batch, head): S = q k^T and o = P v, 2 * hd * T(T+1)/2 FLOPs each  -> 2 hd T(T+1)
//   backward dP = do v^T, dq = dS k, dk = dS^T q, dv = P^T do: twice the forward     -> 4 hd T(T+1)
// plus "items_per_second" = tokens (batch * seq) per second.
// kernel/attention_lse/... is the memory-efficient kernel (kernels/attention_lse.hpp: log-sum-exp saved,
// probabilities recomputed in backward) counted with the same FLOPs, so the two families compare directly
// (its backward really does one more S = q k^T per tile than the count: 5 products instead of 4).
// kernel/attention_flash/... is the Kokkos-team FlashAttention kernel (kernels/attention_flash.hpp), the one a
// GPU build's dispatcher runs, called directly so its host numbers sit beside the sgemm-tiled kernel's.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.hpp"
#include "kernels/adamw.hpp"
#include "kernels/attention.hpp"
#include "kernels/attention_flash.hpp"
#include "kernels/attention_lse.hpp"
#include "kernels/bias.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/embedding.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/swiglu.hpp"
#include "kernels/swiglu_bf16.hpp"

namespace shardft::perf {
namespace {

constexpr std::int64_t kTokens = 384, kHidden = 128, kHeads = 4, kKvHeads = 2, kHeadDim = 32, kInter = 384,
                       kVocab = 272;
constexpr double kF = sizeof(float), kI = sizeof(std::int32_t);

// positions 0..seq-1 in each of the N / seq rows
View1<std::int32_t> positions(std::int64_t n, std::int64_t seq) {
  View1<std::int32_t> p("pos", n);
  auto h = Kokkos::create_mirror_view(p);
  for (std::int64_t i = 0; i < n; ++i) h(i) = static_cast<std::int32_t>(i % seq);
  Kokkos::deep_copy(p, h);
  return p;
}

// ---- rmsnorm [N, d] -------------------------------------------------------------------------
// Also at a 1B Llama's width (d = 2048) and at a q/k norm's (one row per head of 128).
void rmsnorm_fwd_at(benchmark::State& st, std::int64_t N, std::int64_t d) {
  auto x = random_floats("x", N * d, 1), w = random_floats("w", d, 2);
  View1<float> y("y", N * d), rstd("rstd", N);
  for (auto _ : st) {
    rmsnorm_forward(cmat(x, N, d), cvec(w), 1e-5f, mat(y, N, d), vec(rstd));
    Kokkos::fence();
  }
  report_bytes(st, kF * (2 * N * d + d + N));  // x, w in; y, rstd out
}

void rmsnorm_fwd(benchmark::State& st) { rmsnorm_fwd_at(st, kTokens, kHidden); }

void rmsnorm_bwd(benchmark::State& st) {
  const std::int64_t N = kTokens, d = kHidden;
  auto x = random_floats("x", N * d, 1), w = random_floats("w", d, 2), dy = random_floats("dy", N * d, 3, 1e-3f);
  View1<float> rstd("rstd", N), y("y", N * d), dx("dx", N * d), dw("dw", d);
  rmsnorm_forward(cmat(x, N, d), cvec(w), 1e-5f, mat(y, N, d), vec(rstd));
  for (auto _ : st) {
    rmsnorm_backward(cmat(x, N, d), cvec(w), cvec(rstd), cmat(dy, N, d), mat(dx, N, d), vec(dw));
    Kokkos::fence();
  }
  report_bytes(st, kF * (4 * N * d + 3 * d + N));  // x, dy, dx in; dx out; w, dw in+out; rstd
}

// ---- rope on q [N, H*hd], in place ---------------------------------------------------------------
void rope_fwd(benchmark::State& st) {
  const std::int64_t N = kTokens, qd = kHeads * kHeadDim;
  auto q = random_floats("q", N * qd, 4);
  auto pos = positions(N, 24);
  for (auto _ : st) {
    rope_forward(mat(q, N, qd), cids(pos), kHeadDim, 10000.0);
    Kokkos::fence();
  }
  report_bytes(st, kF * 2 * N * qd + kI * N);
}

// The fused path the decoder runs: q and k of a GQA layer rotated in one pass from the cos / sin table.
void rope_rotate_qk_bench(benchmark::State& st) {
  const std::int64_t N = kTokens, qd = kHeads * kHeadDim, kvd = kKvHeads * kHeadDim;
  auto q = random_floats("q", N * qd, 4), k = random_floats("k", N * kvd, 5);
  auto pos = positions(N, 24);
  const RopeTable table = make_rope_table(24, kHeadDim, 10000.0);
  for (auto _ : st) {
    rope_rotate_qk(mat(q, N, qd), mat(k, N, kvd), cids(pos), table, false);
    Kokkos::fence();
  }
  report_bytes(st, kF * 2 * N * (qd + kvd) + kI * N);
}

void rope_bwd(benchmark::State& st) {
  const std::int64_t N = kTokens, qd = kHeads * kHeadDim;
  auto dq = random_floats("dq", N * qd, 4);
  auto pos = positions(N, 24);
  for (auto _ : st) {
    rope_backward(mat(dq, N, qd), cids(pos), kHeadDim, 10000.0);
    Kokkos::fence();
  }
  report_bytes(st, kF * 2 * N * qd + kI * N);
}

// ---- attention ----------------------------------------------------------------------------------
// The exact kernel (lse = false) stores probabilities [B,H,T,T]; the memory-efficient one (lse = true)
// only a log-sum-exp and a delta per query row and head [B*H*T].
enum class AttnKernel { exact, lse, flash };

struct AttnBuffers {
  AttentionShape s;
  AttnKernel kernel;
  bool lse_kernel;
  std::int64_t N, qd, kvd;
  View1<float> q, k, v, o, probs, dout, dq, dk, dv, dscores, lse, delta;
  View1<std::int32_t> seq_ids;
  AttnBuffers(const AttentionShape& shape, AttnKernel kernel_)
      : s(shape),
        kernel(kernel_),
        lse_kernel(kernel_ != AttnKernel::exact),
        N(static_cast<std::int64_t>(shape.batch) * shape.seq),
        qd(static_cast<std::int64_t>(shape.heads) * shape.head_dim),
        kvd(static_cast<std::int64_t>(shape.kv_heads) * shape.head_dim),
        q(random_floats("q", N * qd, 5)),
        k(random_floats("k", N * kvd, 6)),
        v(random_floats("v", N * kvd, 7)),
        o("o", N * qd),
        probs("probs", lse_kernel ? 0 : shape.probs_size()),
        dout(random_floats("do", N * qd, 8)),
        dq("dq", N * qd),
        dk("dk", N * kvd),
        dv("dv", N * kvd),
        dscores("dscores", lse_kernel ? 0 : shape.probs_size()),
        lse("lse", lse_kernel ? N * shape.heads : 0),
        delta("delta", lse_kernel ? N * shape.heads : 0),
        seq_ids("seq_ids", N) {}  // one sample per row, as collate() makes them
  void forward() {
    if (kernel == AttnKernel::flash) {
      attention_forward_lse_flash(s, cmat(q, N, qd), cmat(k, N, kvd), cmat(v, N, kvd), cids(seq_ids), mat(o, N, qd),
                                  vec(lse));
    } else if (lse_kernel) {
      attention_forward_lse(s, cmat(q, N, qd), cmat(k, N, kvd), cmat(v, N, kvd), cids(seq_ids), mat(o, N, qd),
                            vec(lse));
    } else {
      attention_forward(s, cmat(q, N, qd), cmat(k, N, kvd), cmat(v, N, kvd), cids(seq_ids), mat(o, N, qd),
                        vec(probs));
    }
  }
  void backward() {
    if (kernel == AttnKernel::flash) {
      attention_backward_lse_flash(s, cmat(q, N, qd), cmat(k, N, kvd), cmat(v, N, kvd), cids(seq_ids),
                                   cmat(o, N, qd), cvec(lse), cmat(dout, N, qd), mat(dq, N, qd), mat(dk, N, kvd),
                                   mat(dv, N, kvd), vec(delta));
    } else if (lse_kernel) {
      attention_backward_lse(s, cmat(q, N, qd), cmat(k, N, kvd), cmat(v, N, kvd), cids(seq_ids), cmat(o, N, qd),
                             cvec(lse), cmat(dout, N, qd), mat(dq, N, qd), mat(dk, N, kvd), mat(dv, N, kvd),
                             vec(delta));
    } else {
      attention_backward(s, cmat(q, N, qd), cmat(k, N, kvd), cmat(v, N, kvd), cvec(probs), cmat(dout, N, qd),
                         mat(dq, N, qd), mat(dk, N, kvd), mat(dv, N, kvd), vec(dscores));
    }
  }
  double forward_flops() const {
    return 2.0 * s.head_dim * s.seq * (s.seq + 1.0) * s.batch * s.heads;
  }
};

void attention_fwd(benchmark::State& st, AttentionShape shape, AttnKernel kernel) {
  AttnBuffers a(shape, kernel);
  for (auto _ : st) {
    a.forward();
    Kokkos::fence();
  }
  report_gflops(st, a.forward_flops());
  report_items(st, static_cast<double>(a.N));
}

void attention_bwd(benchmark::State& st, AttentionShape shape, AttnKernel kernel) {
  AttnBuffers a(shape, kernel);
  a.forward();
  for (auto _ : st) {
    a.backward();
    Kokkos::fence();
  }
  report_gflops(st, 2.0 * a.forward_flops());
  report_items(st, static_cast<double>(a.N));
}

// ---- swiglu [N, I] ------------------------------------------------------------------------------
void swiglu_fwd(benchmark::State& st) {
  const std::int64_t N = kTokens, I = kInter;
  auto g = random_floats("g", N * I, 9, 3.f), u = random_floats("u", N * I, 10);
  View1<float> s("s", N * I);
  for (auto _ : st) {
    swiglu_forward(cmat(g, N, I), cmat(u, N, I), mat(s, N, I));
    Kokkos::fence();
  }
  report_bytes(st, kF * 3 * N * I);
}

void swiglu_bwd(benchmark::State& st) {
  const std::int64_t N = kTokens, I = kInter;
  auto g = random_floats("g", N * I, 9, 3.f), u = random_floats("u", N * I, 10), ds = random_floats("ds", N * I, 11);
  View1<float> dg("dg", N * I), du("du", N * I);
  for (auto _ : st) {
    swiglu_backward(cmat(g, N, I), cmat(u, N, I), cmat(ds, N, I), mat(dg, N, I), mat(du, N, I));
    Kokkos::fence();
  }
  report_bytes(st, kF * 5 * N * I);
}

// The packed forms the MLP runs: gu [N, 2I] from the fused gate-up GEMM; backward overwrites gu in place.
void swiglu_fwd_packed(benchmark::State& st, std::int64_t N, std::int64_t I) {
  auto gu = random_floats("gu", N * 2 * I, 9, 3.f);
  View1<float> s("s", N * I);
  for (auto _ : st) {
    swiglu_forward_packed(cmat(gu, N, 2 * I), mat(s, N, I));
    Kokkos::fence();
  }
  report_bytes(st, kF * 3 * N * I);
}

void swiglu_bwd_packed(benchmark::State& st, std::int64_t N, std::int64_t I) {
  auto gu0 = random_floats("gu0", N * 2 * I, 9, 3.f), ds = random_floats("ds", N * I, 11);
  View1<float> gu("gu", N * 2 * I);
  for (auto _ : st) {
    st.PauseTiming();
    Kokkos::deep_copy(gu, gu0);  // the kernel overwrites its input
    st.ResumeTiming();
    swiglu_backward_packed_inplace(mat(gu, N, 2 * I), cmat(ds, N, I));
    Kokkos::fence();
  }
  report_bytes(st, kF * 5 * N * I);  // g, u, ds in; dg, du out
}

// The bf16 forms a bf16 step runs (kernels/swiglu_bf16.hpp): bf16 in and out, backward also writes s again.
View1<bf16> random_bf16(const std::string& name, std::int64_t n, std::uint32_t seed, float scale) {
  const auto f = random_floats(name + "_f32", n, seed, scale);
  View1<bf16> out(name, n);
  to_bf16(cvec(f), Unmanaged1<bf16>(out.data(), n));
  return out;
}
Unmanaged2<bf16> mat16(const View1<bf16>& v, std::int64_t r, std::int64_t c) { return Unmanaged2<bf16>(v.data(), r, c); }

void swiglu_fwd_packed_bf16(benchmark::State& st, std::int64_t N, std::int64_t I) {
  const auto gu = random_bf16("gu", N * 2 * I, 9, 3.f);
  View1<bf16> s("s", N * I);
  for (auto _ : st) {
    swiglu_forward_packed_bf16(Unmanaged2<const bf16>(gu.data(), N, 2 * I), mat16(s, N, I));
    Kokkos::fence();
  }
  report_bytes(st, 2 * 3 * N * I);
}

void swiglu_bwd_packed_bf16(benchmark::State& st, std::int64_t N, std::int64_t I) {
  const auto gu0 = random_bf16("gu0", N * 2 * I, 9, 3.f), ds = random_bf16("ds", N * I, 11, 1.f);
  View1<bf16> gu("gu", N * 2 * I), s("s", N * I);
  for (auto _ : st) {
    st.PauseTiming();
    Kokkos::deep_copy(gu, gu0);  // the kernel overwrites its input
    st.ResumeTiming();
    swiglu_backward_packed_bf16(mat16(gu, N, 2 * I), Unmanaged2<const bf16>(ds.data(), N, I), mat16(s, N, I));
    Kokkos::fence();
  }
  report_bytes(st, 2 * 6 * N * I);  // g, u, ds in; dg, du, s out
}

// ---- embedding: ids [N], table [V, d] -------------------------------------------------------------
void embedding_fwd(benchmark::State& st) {
  const std::int64_t N = kTokens, d = kHidden, V = kVocab;
  auto ids = random_ids("ids", N, static_cast<int>(V), 12);
  auto table = random_floats("table", V * d, 13);
  View1<float> out("out", N * d);
  for (auto _ : st) {
    embedding_forward(cids(ids), cmat(table, V, d), mat(out, N, d));
    Kokkos::fence();
  }
  report_bytes(st, kF * 2 * N * d + kI * N);  // a table row in, an output row out, per token
}

void embedding_bwd(benchmark::State& st, std::int64_t N, std::int64_t V, std::int64_t d) {
  auto ids = random_ids("ids", N, static_cast<int>(V), 12);
  auto dout = random_floats("dout", N * d, 14, 1e-3f);
  View1<float> dtable("dtable", V * d);
  for (auto _ : st) {
    embedding_backward(cids(ids), cmat(dout, N, d), mat(dtable, V, d));
    Kokkos::fence();
  }
  report_bytes(st, kF * 3 * N * d + kI * N);  // dout row in, dtable row in + out, per token
}

// ---- cross-entropy: logits [N, V], a quarter of the targets ignored (-100) --------------------------
void cross_entropy_fwd(benchmark::State& st, std::int64_t N, std::int64_t V) {
  auto logits = random_floats("logits", N * V, 15, 4.f);
  auto targets = random_ids("targets", N, static_cast<int>(V), 16, 4);
  for (auto _ : st) {
    auto sums = cross_entropy_forward(cmat(logits, N, V), cids(targets));
    benchmark::DoNotOptimize(sums);
  }
  report_bytes(st, kF * N * V + kI * N);
}

void cross_entropy_fwd_bwd(benchmark::State& st, std::int64_t N, std::int64_t V) {
  auto logits = random_floats("logits", N * V, 15, 4.f);
  auto targets = random_ids("targets", N, static_cast<int>(V), 16, 4);
  // The kernel overwrites the logits with their gradient, so later iterations see small values
  // (|g| ~ 1/N); the work per element (one exp, one division) does not depend on them.
  for (auto _ : st) {
    auto sums = cross_entropy_forward_backward(mat(logits, N, V), cids(targets), 1.f / static_cast<float>(N));
    benchmark::DoNotOptimize(sums);
  }
  report_bytes(st, kF * 2 * N * V + kI * N);
}

// ---- bias gradient: dy [N, c] summed over the rows ---------------------------------------------------
void bias_bwd(benchmark::State& st) {
  const std::int64_t N = kTokens, c = kHeads * kHeadDim;
  auto dy = random_floats("dy", N * c, 21, 1e-3f);
  View1<float> db("db", c);
  for (auto _ : st) {
    bias_backward(cmat(dy, N, c), vec(db));
    Kokkos::fence();
  }
  report_bytes(st, kF * (N * c + 2 * c));
}

// ---- optimizer and elementwise over 1M parameters ----------------------------------------------------
constexpr std::int64_t kParams = 1 << 20;

struct OptimizerRun {
  std::int64_t begin, length;
  bool decay;
};

void adamw(benchmark::State& st) {
  auto p = random_floats("p", kParams, 17), g = random_floats("g", kParams, 18, 1e-2f);
  View1<float> m("m", kParams), v("v", kParams);
  AdamWHyper h;
  h.weight_decay = 0.01f;
  for (auto _ : st) {
    adamw_update(h, vec(p), cvec(g), vec(m), vec(v));
    Kokkos::fence();
    ++h.step;
  }
  report_bytes(st, kF * 7 * kParams);  // p, g, m, v in; p, m, v out
  report_items(st, static_cast<double>(kParams));
}

// A shard of kParams cut like a 16-layer model's parameters (146 of them: per layer two norms without
// weight decay and seven matrices with it; an embedding and a final norm), with 16 elements of padding
// after each layer, as the ZeRO engine's owned region is.
std::vector<OptimizerRun> model_shaped_runs() {
  constexpr std::int64_t kLayers = 16, kNorm = 64, kPad = 16;
  const std::int64_t per_layer = (kParams - 4 * kNorm) / (kLayers + 1);
  const std::int64_t matrix = (per_layer - 2 * kNorm - kPad) / 7;
  std::vector<OptimizerRun> runs;
  std::int64_t at = 0;
  auto add = [&](std::int64_t n, bool decay) {
    runs.push_back({at, n, decay});
    at += n;
  };
  add(per_layer, true);  // embedding
  for (std::int64_t l = 0; l < kLayers; ++l) {
    add(kNorm, false);
    for (int k = 0; k < 4; ++k) add(matrix, true);
    add(kNorm, false);
    for (int k = 0; k < 3; ++k) add(matrix, true);
    at += kPad;
  }
  add(kNorm, false);
  return runs;
}

// The optimizer step of the engine before the fused kernel: clip_to_norm's pass over the gradient, then
// one adamw_update launch per parameter (146 launches).
void adamw_clip_per_param(benchmark::State& st) {
  const std::vector<OptimizerRun> runs = model_shaped_runs();
  auto p = random_floats("p", kParams, 17), g = random_floats("g", kParams, 18, 1e-2f);
  View1<float> m("m", kParams), v("v", kParams);
  View1<double> norm_sq("norm_sq", 1);
  sum_squares(cvec(g), norm_sq);  // the first clip scales g to norm 1; later ones multiply by ~1: same work
  AdamWHyper h;
  for (auto _ : st) {
    clip_to_norm(vec(g), norm_sq, 1.0);
    for (const OptimizerRun& r : runs) {
      h.weight_decay = r.decay ? 0.01f : 0.f;
      adamw_update(h, Unmanaged1<float>(p.data() + r.begin, r.length), Unmanaged1<const float>(g.data() + r.begin, r.length),
                   Unmanaged1<float>(m.data() + r.begin, r.length), Unmanaged1<float>(v.data() + r.begin, r.length));
    }
    Kokkos::fence();
    ++h.step;
  }
  report_bytes(st, kF * 9 * kParams);  // clip: g in and out; AdamW: p, g, m, v in; p, m, v out
  report_items(st, static_cast<double>(kParams));
}

// The engine's step now: the clip factor on the device, then ONE launch over the shard's runs that
// multiplies each gradient element by it as AdamW reads it (the gradient is read once, never written).
void adamw_clip_one_launch(benchmark::State& st) {
  std::vector<FlatRun> runs;
  for (const OptimizerRun& r : model_shaped_runs()) runs.push_back({r.begin, r.length, r.decay ? 1 : 0});
  const FlatRuns table = make_flat_runs(runs);
  auto p = random_floats("p", kParams, 17), g = random_floats("g", kParams, 18, 1e-2f);
  View1<float> m("m", kParams), v("v", kParams), factor("factor", 1);
  View1<double> norm_sq("norm_sq", 1);
  sum_squares(cvec(g), norm_sq);
  AdamWHyper h;
  h.weight_decay = 0.01f;
  for (auto _ : st) {
    clip_factor(norm_sq, 1.0, factor);
    adamw_update_runs(h, table, vec(p), cvec(g), vec(m), vec(v), cvec(factor));
    Kokkos::fence();
    ++h.step;
  }
  report_bytes(st, kF * 7 * kParams);  // p, g, m, v in; p, m, v out
  report_items(st, static_cast<double>(kParams));
}

void round_bf16(benchmark::State& st) {
  auto src = random_floats("src", kParams, 19);
  View1<float> dst("dst", kParams);
  for (auto _ : st) {
    round_to_bf16(cvec(src), vec(dst));
    Kokkos::fence();
  }
  report_bytes(st, kF * 2 * kParams);
  report_items(st, static_cast<double>(kParams));
}

// The gradient-norm reduction of clip_grad_norm.
void sum_sq(benchmark::State& st) {
  auto x = random_floats("x", kParams, 20);
  for (auto _ : st) benchmark::DoNotOptimize(sum_squares(cvec(x)));
  report_bytes(st, kF * kParams);
  report_items(st, static_cast<double>(kParams));
}

void reg(const std::string& name, void (*fn)(benchmark::State&)) {
  benchmark::RegisterBenchmark(name.c_str(), fn)->Unit(benchmark::kMicrosecond);
}

std::string attn_name(const AttentionShape& s) {
  return "B" + std::to_string(s.batch) + "_T" + std::to_string(s.seq) + "_H" + std::to_string(s.heads) + "_G" +
         std::to_string(s.kv_heads) + "_hd" + std::to_string(s.head_dim);
}

const bool registered = [] {
  reg("kernel/rmsnorm/fwd/N384_d128", rmsnorm_fwd);
  for (const auto& nd : {std::pair<std::int64_t, std::int64_t>{1024, 2048}, {8192, 128}}) {
    benchmark::RegisterBenchmark(("kernel/rmsnorm/fwd/N" + std::to_string(nd.first) + "_d" + std::to_string(nd.second)).c_str(),
                                 [nd](benchmark::State& st) { rmsnorm_fwd_at(st, nd.first, nd.second); })
        ->Unit(benchmark::kMicrosecond);
  }
  reg("kernel/rmsnorm/bwd/N384_d128", rmsnorm_bwd);
  reg("kernel/rope/fwd/N384_H4_hd32", rope_fwd);
  reg("kernel/rope/bwd/N384_H4_hd32", rope_bwd);
  reg("kernel/rope/rotate_qk/N384_H4_G2_hd32", rope_rotate_qk_bench);
  auto reg_attention = [](const std::string& family, const AttentionShape& s, AttnKernel kernel) {
    benchmark::RegisterBenchmark(("kernel/" + family + "/fwd/" + attn_name(s)).c_str(),
                                 [s, kernel](benchmark::State& st) { attention_fwd(st, s, kernel); })
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("kernel/" + family + "/bwd/" + attn_name(s)).c_str(),
                                 [s, kernel](benchmark::State& st) { attention_bwd(st, s, kernel); })
        ->Unit(benchmark::kMicrosecond);
  };
  for (const AttentionShape s : {AttentionShape{16, 32, 4, 2, 32}, AttentionShape{2, 256, 4, 2, 32}}) {
    reg_attention("attention", s, AttnKernel::exact);
  }
  // The memory-efficient kernel at the exact kernel's shapes and at the wide step's (h512: 8 / 4 heads of 64)
  // over 512 and 2048 tokens.
  for (const AttentionShape s : {AttentionShape{16, 32, 4, 2, 32}, AttentionShape{2, 256, 4, 2, 32},
                                 AttentionShape{1, 512, 8, 4, 64}, AttentionShape{1, 2048, 8, 4, 64}}) {
    reg_attention("attention_lse", s, AttnKernel::lse);
  }
  for (const AttentionShape s : {AttentionShape{2, 256, 4, 2, 32}, AttentionShape{1, 2048, 8, 4, 64}}) {
    reg_attention("attention_flash", s, AttnKernel::flash);
  }
  reg("kernel/swiglu/fwd/N384_I384", swiglu_fwd);
  reg("kernel/swiglu/bwd/N384_I384", swiglu_bwd);
  for (const auto& ni : {std::pair<std::int64_t, std::int64_t>{kTokens, kInter}, {512, 2048}}) {
    const std::string shape = "N" + std::to_string(ni.first) + "_I" + std::to_string(ni.second);
    benchmark::RegisterBenchmark(("kernel/swiglu/fwd_packed/" + shape).c_str(),
                                 [ni](benchmark::State& st) { swiglu_fwd_packed(st, ni.first, ni.second); })
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("kernel/swiglu/bwd_packed/" + shape).c_str(),
                                 [ni](benchmark::State& st) { swiglu_bwd_packed(st, ni.first, ni.second); })
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("kernel/swiglu/fwd_packed_bf16/" + shape).c_str(),
                                 [ni](benchmark::State& st) { swiglu_fwd_packed_bf16(st, ni.first, ni.second); })
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("kernel/swiglu/bwd_packed_bf16/" + shape).c_str(),
                                 [ni](benchmark::State& st) { swiglu_bwd_packed_bf16(st, ni.first, ni.second); })
        ->Unit(benchmark::kMicrosecond);
  }
  reg("kernel/embedding/fwd/N384_V272_d128", embedding_fwd);
  // The default model's shapes, then a Llama-2-sized vocabulary (32000) at a small model's width.
  const auto reg_embedding_bwd = [](std::int64_t N, std::int64_t V, std::int64_t d) {
    const std::string name = "kernel/embedding/bwd/N" + std::to_string(N) + "_V" + std::to_string(V) + "_d" +
                             std::to_string(d);
    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { embedding_bwd(st, N, V, d); })
        ->Unit(benchmark::kMicrosecond);
  };
  reg_embedding_bwd(kTokens, kVocab, kHidden);
  reg_embedding_bwd(2048, 32000, 256);
  const auto reg_cross_entropy = [](std::int64_t N, std::int64_t V) {
    const std::string shape = "N" + std::to_string(N) + "_V" + std::to_string(V);
    benchmark::RegisterBenchmark(("kernel/cross_entropy/fwd/" + shape).c_str(),
                                 [=](benchmark::State& st) { cross_entropy_fwd(st, N, V); })
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("kernel/cross_entropy/fwd_bwd/" + shape).c_str(),
                                 [=](benchmark::State& st) { cross_entropy_fwd_bwd(st, N, V); })
        ->Unit(benchmark::kMicrosecond);
  };
  reg_cross_entropy(kTokens, kVocab);
  reg_cross_entropy(64, 32000);
  reg("kernel/bias/bwd/N384_c128", bias_bwd);
  reg("kernel/adamw/1M", adamw);
  reg("kernel/adamw/clip_then_146_launches/1M", adamw_clip_per_param);
  reg("kernel/adamw/clip_folded_one_launch/1M", adamw_clip_one_launch);
  reg("kernel/round_to_bf16/1M", round_bf16);
  reg("kernel/sum_squares/1M", sum_sq);
  return true;
}();

}  // namespace
}  // namespace shardft::perf
