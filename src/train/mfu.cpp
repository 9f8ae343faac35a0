#include "train/mfu.hpp"

#include <algorithm>
#include <chrono>

#include "kernels/gemm.hpp"

namespace shardft {

double training_flops_per_token(const ModelConfig& m, double mean_sequence_length) {
  const double d = m.hidden_size, hd = m.head_dim(), I = m.intermediate_size, V = m.vocab_size;
  const double q = m.num_attention_heads * hd, kv = m.num_key_value_heads * hd;
  const double per_layer = d * q + 2 * d * kv + q * d + 3 * d * I;  // q, k, v, o, gate, up, down
  const double matmul_params = m.num_hidden_layers * per_layer + V * d;  // + the LM head
  return 6.0 * matmul_params + 12.0 * m.num_hidden_layers * d * mean_sequence_length;
}

double peak_flops_per_rank(double peak_tflops) {
  if (peak_tflops > 0) return peak_tflops * 1e12;
  constexpr int n = 512;
  View2<float> a("mfu_a", n, n), b("mfu_b", n, n), c("mfu_c", n, n);
  Kokkos::deep_copy(a, 1.f);
  Kokkos::deep_copy(b, 0.5f);
  gemm(Op::N, Op::N, 1.f, a, b, 0.f, c);  // warm-up: BLAS buffers, caches
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    gemm(Op::N, Op::N, 1.f, a, b, 0.f, c);
    Kokkos::fence();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * n / std::max(s, 1e-9));
  }
  return best;
}

}  // namespace shardft
