// GEMM at the shapes the decoder runs, through kernels/gemm.hpp (OpenBLAS sgemm, one thread).
//
// For a linear layer with weight W [out, in] over N tokens (N = batch * seq) a training step runs
//   fwd     y[N,out]  = x[N,in] W^T        linear_forward            gemm(N, T)  m=N   n=out k=in
//   bwd_dx  dx[N,in]  = dy[N,out] W        first GEMM of linear_backward  gemm(N, N)  m=N   n=in  k=out
//   bwd_dw  dW[out,in] += dy^T x           second GEMM of linear_backward gemm(T, N)  m=out n=in  k=N
// each 2*m*n*k FLOPs. Layers with the same [out,in] share one benchmark (q/o, k/v, gate/up).
// "gemm/square" is the single-core sgemm reference peak; "gemm_mix" runs every GEMM of one training
// step of a model, in the step's order, with per-layer weights and activations, and reports the
// GFLOP/s the step would reach if it were nothing but GEMMs (compare with train_step's GFLOPS).
// "gemm_bf16/{amx,widened}/..." run a bf16 step's products (bf16 x bf16, fp32 accumulation; forward and
// dgrad written in bf16, wgrad added into fp32) at the linear shapes of perf/cpu_vs_torch.sh's S and M
// over 1024 tokens, on AMX tiles and by widening tiles into sgemm (the path of a CPU without AMX).
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "config/model_config.hpp"
#include "kernels/amx_gemm_bf16.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/gemm.hpp"

namespace shardft::perf {
namespace {

struct LinearShape {
  const char* name;
  std::int64_t out, in;
};

// The distinct linear shapes of a model config: q/o (both [d,d] since heads*head_dim = hidden),
// k/v, gate/up, down, lm_head.
std::vector<LinearShape> linear_shapes(const ModelConfig& c) {
  const std::int64_t d = c.hidden_size, hd = c.head_dim(), I = c.intermediate_size;
  const std::int64_t qd = c.num_attention_heads * hd, kvd = c.num_key_value_heads * hd;
  return {{"q_o_proj", qd, d}, {"k_v_proj", kvd, d},
          {"gate_up_proj", I, d}, {"down_proj", d, I}, {"lm_head", c.vocab_size, d}};
}

void bench_linear_fwd(benchmark::State& st, std::int64_t N, std::int64_t out, std::int64_t in) {
  auto x = random_floats("x", N * in, 1), w = random_floats("w", out * in, 2, 0.1f);
  View1<float> y("y", N * out);
  for (auto _ : st) {
    linear_forward(cmat(x, N, in), cvec(w), mat(y, N, out));
    Kokkos::fence();
  }
  report_gflops(st, 2.0 * N * out * in);
}

void bench_linear_bwd_dx(benchmark::State& st, std::int64_t N, std::int64_t out, std::int64_t in) {
  auto dy = random_floats("dy", N * out, 3), w = random_floats("w", out * in, 2, 0.1f);
  View1<float> dx("dx", N * in);
  for (auto _ : st) {
    gemm(Op::N, Op::N, 1.f, cmat(dy, N, out), cmat(w, out, in), 0.f, mat(dx, N, in));
    Kokkos::fence();
  }
  report_gflops(st, 2.0 * N * out * in);
}

void bench_linear_bwd_dw(benchmark::State& st, std::int64_t N, std::int64_t out, std::int64_t in) {
  auto dy = random_floats("dy", N * out, 3, 1e-3f), x = random_floats("x", N * in, 1);
  View1<float> dw("dw", out * in);
  for (auto _ : st) {
    gemm(Op::T, Op::N, 1.f, cmat(dy, N, out), cmat(x, N, in), 1.f, mat(dw, out, in));
    Kokkos::fence();
  }
  report_gflops(st, 2.0 * N * out * in);
}

void bench_square(benchmark::State& st, std::int64_t n) {
  auto a = random_floats("a", n * n, 4), b = random_floats("b", n * n, 5);
  View1<float> c("c", n * n);
  for (auto _ : st) {
    gemm(Op::N, Op::N, 1.f, cmat(a, n, n), cmat(b, n, n), 0.f, mat(c, n, n));
    Kokkos::fence();
  }
  report_gflops(st, 2.0 * n * n * n);
}

// Every GEMM of one training step (forward, then backward in reverse layer order), as in
// model/decoder.cpp: per layer q, k, v, o, gate, up, down; then the tied LM head.
void bench_step_gemms(benchmark::State& st, ModelConfig c, std::int64_t N) {
  const std::int64_t d = c.hidden_size, hd = c.head_dim(), I = c.intermediate_size, V = c.vocab_size;
  const std::int64_t qd = c.num_attention_heads * hd, kvd = c.num_key_value_heads * hd;
  struct Lin {
    std::int64_t out, in;
    View1<float> w, dw, x;  // weight, its gradient, the layer input kept for backward
  };
  std::vector<std::vector<Lin>> layers;  // [layer][q, k, v, o, gate, up, down]
  std::uint32_t seed = 10;
  auto make = [&](std::int64_t out, std::int64_t in) {
    return Lin{out, in, random_floats("w", out * in, seed++, 0.05f), View1<float>("dw", out * in),
               random_floats("x", N * in, seed++)};
  };
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    layers.push_back({make(qd, d), make(kvd, d), make(kvd, d), make(d, qd), make(I, d), make(I, d), make(d, I)});
  }
  Lin head = make(V, d);
  const std::int64_t widest = std::max<std::int64_t>({d, qd, I, V});
  View1<float> y("y", N * widest), dx("dx", N * widest);
  auto dy = random_floats("dy", N * widest, 99, 1e-3f);
  double flops = 0.0;
  auto fwd = [&](const Lin& L) {
    linear_forward(cmat(L.x, N, L.in), cvec(L.w), mat(y, N, L.out));
  };
  auto bwd = [&](const Lin& L) {
    linear_backward(cmat(L.x, N, L.in), cvec(L.w), cmat(dy, N, L.out), mat(dx, N, L.in), 0.f, vec(L.dw));
  };
  for (const auto& layer : layers)
    for (const auto& L : layer) flops += 6.0 * N * L.out * L.in;
  flops += 6.0 * N * head.out * head.in;
  auto one_step = [&] {
    for (const auto& layer : layers)
      for (const auto& L : layer) fwd(L);
    fwd(head);
    bwd(head);
    for (auto it = layers.rbegin(); it != layers.rend(); ++it)
      for (auto L = it->rbegin(); L != it->rend(); ++L) bwd(*L);
  };
  one_step();  // untimed: the wide mix takes ~0.2 s, so a run may be a single timed iteration
  for (auto _ : st) {
    one_step();
    Kokkos::fence();
  }
  report_gflops(st, flops);
}

std::string dims(std::int64_t m, std::int64_t n, std::int64_t k);

// One bf16 product C = op(A) op(B) of a linear layer's step (fwd: N,T into bf16; bwd_dx: N,N into bf16;
// bwd_dw: T,N added into fp32), on AMX tiles or widened into sgemm.
void bench_bf16_product(benchmark::State& st, Op op_a, Op op_b, std::int64_t m, std::int64_t n, std::int64_t k,
                        bool on_amx) {
  if (on_amx && !amx::available()) {
    st.SkipWithError(("no AMX here: " + amx::describe()).c_str());
    return;
  }
  const std::int64_t ar = op_a == Op::N ? m : k, ac = op_a == Op::N ? k : m;
  const std::int64_t br = op_b == Op::N ? k : n, bc = op_b == Op::N ? n : k;
  auto a32 = random_floats("a", ar * ac, 6), b32 = random_floats("b", br * bc, 7, 0.05f);
  View1<bf16> a("a16", ar * ac), b("b16", br * bc), c16("c16", m * n);
  View1<float> c("c", m * n);
  to_bf16(a32, a);
  to_bf16(b32, b);
  const GemmOperand ga(Unmanaged2<const bf16>(a.data(), ar, ac)), gb(Unmanaged2<const bf16>(b.data(), br, bc));
  const bool accumulate = op_a == Op::T;  // wgrad
  amx::set_enabled(on_amx);
  for (auto _ : st) {
    if (accumulate) {
      gemm_mixed(op_a, op_b, 1.f, ga, gb, 1.f, Unmanaged2<float>(c.data(), m, n));
    } else {
      gemm_mixed_bf16_out(op_a, op_b, 1.f, ga, gb, Unmanaged2<bf16>(c16.data(), m, n));
    }
    Kokkos::fence();
  }
  amx::set_enabled(true);
  report_gflops(st, 2.0 * m * n * k);
}

void register_bf16(const std::string& tag, const ModelConfig& c, std::int64_t N) {
  for (const LinearShape& s : linear_shapes(c)) {
    if (std::string(s.name) == "lm_head") continue;  // the byte vocabulary's head is a sliver of the step
    const std::int64_t out = s.out, in = s.in;
    for (const bool on_amx : {true, false}) {
      const std::string base = std::string("gemm_bf16/") + (on_amx ? "amx/" : "widened/") + tag + "/" + s.name;
      benchmark::RegisterBenchmark((base + "/fwd/" + dims(N, out, in)).c_str(), [=](benchmark::State& st) {
        bench_bf16_product(st, Op::N, Op::T, N, out, in, on_amx);
      })->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark((base + "/bwd_dx/" + dims(N, in, out)).c_str(), [=](benchmark::State& st) {
        bench_bf16_product(st, Op::N, Op::N, N, in, out, on_amx);
      })->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark((base + "/bwd_dw/" + dims(out, in, N)).c_str(), [=](benchmark::State& st) {
        bench_bf16_product(st, Op::T, Op::N, out, in, N, on_amx);
      })->Unit(benchmark::kMicrosecond);
    }
  }
}

ModelConfig default_model() { return ModelConfig{}; }

// The GEMM-heavier config of train_step/wide_h512_L2 (bench_step.cpp).
ModelConfig wide_model() {
  ModelConfig c;
  c.hidden_size = 512;
  c.intermediate_size = 1536;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 4;
  c.num_hidden_layers = 2;
  c.max_position_embeddings = 512;
  return c;
}

std::string dims(std::int64_t m, std::int64_t n, std::int64_t k) {
  return "m" + std::to_string(m) + "_n" + std::to_string(n) + "_k" + std::to_string(k);
}

void register_linear(const std::string& tag, const ModelConfig& c, std::int64_t N) {
  for (const LinearShape& s : linear_shapes(c)) {
    const std::int64_t out = s.out, in = s.in;
    const std::string base = "gemm/" + tag + "/" + s.name;
    benchmark::RegisterBenchmark((base + "/fwd/" + dims(N, out, in)).c_str(),
                                 [=](benchmark::State& st) { bench_linear_fwd(st, N, out, in); })
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((base + "/bwd_dx/" + dims(N, in, out)).c_str(),
                                 [=](benchmark::State& st) { bench_linear_bwd_dx(st, N, out, in); })
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((base + "/bwd_dw/" + dims(out, in, N)).c_str(),
                                 [=](benchmark::State& st) { bench_linear_bwd_dw(st, N, out, in); })
        ->Unit(benchmark::kMicrosecond);
  }
}

const bool registered = [] {
  // Default model: 16 samples of ~24 tokens per micro-batch (N = 384), and N = 512.
  register_linear("h128_N384", default_model(), 384);
  register_linear("h128_N512", default_model(), 512);
  // The wide config at one 512-token sequence.
  register_linear("h512_N512", wide_model(), 512);
  for (std::int64_t n : {512, 1024}) {
    benchmark::RegisterBenchmark(("gemm/square/sgemm_nn/" + dims(n, n, n)).c_str(),
                                 [=](benchmark::State& st) { bench_square(st, n); })
        ->Unit(benchmark::kMicrosecond);
  }
  // perf/cpu_vs_torch.sh's shapes S and M (torch_step.py), 1024 tokens a step.
  ModelConfig s_shape = wide_model(), m_shape = wide_model();
  s_shape.hidden_size = 256;
  s_shape.intermediate_size = 768;
  m_shape.num_key_value_heads = 8;
  register_bf16("S_N1024", s_shape, 1024);
  register_bf16("M_N1024", m_shape, 1024);
  benchmark::RegisterBenchmark("gemm_mix/step_gemms/h128_L2_N384",
                               [](benchmark::State& st) { bench_step_gemms(st, default_model(), 384); })
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("gemm_mix/step_gemms/h512_L2_N512",
                               [](benchmark::State& st) { bench_step_gemms(st, wide_model(), 512); })
      ->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace
}  // namespace shardft::perf
