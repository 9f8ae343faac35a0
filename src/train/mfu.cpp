#include "train/mfu.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <set>
#include <sstream>
#include <vector>

#include "kernels/amx_gemm_bf16.hpp"
#include "kernels/blas_core.hpp"
#include "kernels/compute_device.hpp"
#include "kernels/gemm.hpp"

namespace shardft {

namespace {

// Known GPUs: the device name's tokens (upper case, split at ' ', '-', '_') must include every
// `need` and none of `never`; the first matching row wins, so specific rows come first. TFLOP/s per
// GPU, dense. Sources (checked for this table; "sparse" figures halved):
//  - A100 (SXM4 and PCIe alike): BF16 tensor 312 (624 sparse), FP32 19.5 — NVIDIA A100 datasheet
//    (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), as tabulated at
//    https://glennklockwood.com/garden/processors/A100 .
//  - H100 SXM5: BF16 tensor 1,979 sparse -> 989, FP32 67; H100 PCIe: 1,513 sparse -> 756, FP32 51 —
//    NVIDIA H100 datasheet, as tabulated at https://archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html
//    ("* Shown with sparsity"); matrix BF16 989.4 dense at https://glennklockwood.com/garden/processors/h100 .
//  - H200 (SXM): same GH100 compute as H100 SXM, BF16 ~989 dense, FP32 67 —
//    https://itkb.uw.cz/2026/06/nvidia-h200-vs-b300-precisions-cores.html (dense table),
//    https://hmc-tech.com/gpu/nvidia-h100-vs-nvidia-h200-sxm-vs-nvidia-gb200 (FP32 66.91).
//  - L40S: BF16 tensor 362.05 (733 sparse), FP32 91.6; L40: 181.05 (362.1 sparse), FP32 90.5 — NVIDIA
//    L40/L40S datasheet table at https://www.mullet.se/product.html?product_id=355414 .
//  - A10: BF16 tensor 125 (250 sparse), FP32 31.2 — NVIDIA A10 datasheet (FP32 31.24 also at
//    https://sysrqmts.com/ru/gpus/compare/nvidia-a10-pcie-vs-nvidia-quadro-rtx-4000).
//  - L4: BF16 tensor 121 (242 sparse), FP32 30.3 — NVIDIA L4 datasheet (FP32 30.29 at
//    https://fpsbench.com/compare/gpu/nvidia-l4-vs-nvidia-tesla-m40). Boost-clock arithmetic gives
//    125.3 dense; the datasheet's 121 is kept.
//  - V100: no bf16 tensor cores (its 125 / 112 tensor TFLOP/s are fp16), FP32 15.7 (SXM2) / 14 (PCIe)
//    — https://developer.nvidia.com/programming-tensor-cores-cuda-9-0 (125 tensor),
//    https://www.io-tech.fi/uutinen/nvidia-esitteli-tesla-v100-pci-express-kiihdyttimen-tieteelliseen-laskentaan/
//    (PCIe: 14 FP32, 112 tensor).
//  - GeForce RTX 4090: BF16/FP16 tensor with fp32 accumulate 165.2 (330.3 sparse; the 330 dense figure
//    is fp16 accumulate, which GeForce runs at twice the fp32-accumulate rate), FP32 82.6 — NVIDIA Ada
//    whitepaper, as at https://waredb.com/processor/nvidia-geforce-rtx-4090 .
// Left out (0: measured) because their figures could not be checked here: H100 NVL, H200 NVL, GH200,
// V100S, A10G, RTX 4090 D, laptop parts, Blackwell.
struct KnownGpu {
  std::vector<const char*> need, never;
  double bf16_tflops, fp32_tflops;
};

const std::vector<KnownGpu>& known_gpus() {
  static const std::vector<KnownGpu> table = {
      {{"H100", "PCIE"}, {"NVL"}, 756, 51},
      {{"H100"}, {"NVL"}, 989, 67},
      {{"H200"}, {"NVL"}, 989, 67},
      {{"A100"}, {}, 312, 19.5},
      {{"A10"}, {}, 125, 31.2},
      {{"L40S"}, {}, 362, 91.6},
      {{"L40"}, {}, 181, 90.5},
      {{"L4"}, {}, 121, 30.3},
      {{"V100", "SXM2"}, {}, 0, 15.7},
      {{"V100", "PCIE"}, {}, 0, 14},
      {{"RTX", "4090"}, {"D", "LAPTOP"}, 165.2, 82.6},
  };
  return table;
}

std::set<std::string> name_tokens(const std::string& name) {
  std::set<std::string> tokens;
  std::string cur;
  for (char ch : name + " ") {
    if (ch == ' ' || ch == '-' || ch == '_') {
      if (!cur.empty()) tokens.insert(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    }
  }
  return tokens;
}

// The best FLOP/s of five runs of `product` (a square n x n x n GEMM on the host), after one untimed
// run that sizes the library's buffers and warms the caches.
template <class Product>
double best_square_gemm_rate(int n, const Product& product) {
  product();
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    product();
    Kokkos::fence();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * n / std::max(s, 1e-9));
  }
  return best;
}

// The fp32 sgemm rate of this rank through the model's own gemm() (BLAS on the host).
double measured_host_sgemm_flops() {
  constexpr int n = 512;
  View2<float> a("mfu_a", n, n), b("mfu_b", n, n), c("mfu_c", n, n);
  Kokkos::deep_copy(a, 1.f);
  Kokkos::deep_copy(b, 0.5f);
  return best_square_gemm_rate(n, [&] { gemm(Op::N, Op::N, 1.f, a, b, 0.f, c); });
}

// The bf16 x bf16 GEMM rate of this rank through the model's own gemm_mixed (AMX tiles where it runs).
double measured_host_bf16_gemm_flops() {
  constexpr int n = 512;
  View2<bf16> a("mfu_a16", n, n), b("mfu_b16", n, n);
  View2<float> c("mfu_c", n, n);
  Kokkos::deep_copy(a, bf16(1.f));
  Kokkos::deep_copy(b, bf16(0.5f));
  const GemmOperand ga(Unmanaged2<const bf16>(a.data(), n, n)), gb(Unmanaged2<const bf16>(b.data(), n, n));
  return best_square_gemm_rate(n, [&] { gemm_mixed(Op::N, Op::N, 1.f, ga, gb, 0.f, c); });
}

}  // namespace

double training_flops_per_token(const ModelConfig& m, double mean_sequence_length) {
  const double d = m.hidden_size, hd = m.head_dim(), I = m.intermediate_size, V = m.vocab_size;
  const double q = m.num_attention_heads * hd, kv = m.num_key_value_heads * hd;
  const double per_layer = d * q + 2 * d * kv + q * d + 3 * d * I;  // q, k, v, o, gate, up, down
  const double matmul_params = m.num_hidden_layers * per_layer + V * d;  // + the LM head
  // Attention's scores and weighted sum: 12 L H hd T (PaLM's 12 L H Q T), heads * head_dim wide, which is
  // hidden_size only where head_dim is hidden / heads.
  return 6.0 * matmul_params + 12.0 * m.num_hidden_layers * q * mean_sequence_length;
}

double known_gpu_peak_tflops(const std::string& name, bool bf16) {
  const std::set<std::string> tokens = name_tokens(name);
  if (tokens.count("MIG")) return 0;  // a slice: a fraction of the whole GPU's peak
  for (const KnownGpu& gpu : known_gpus()) {
    const bool has_all = std::all_of(gpu.need.begin(), gpu.need.end(), [&](const char* t) { return tokens.count(t); });
    const bool has_none =
        std::none_of(gpu.never.begin(), gpu.never.end(), [&](const char* t) { return tokens.count(t); });
    if (has_all && has_none) return bf16 ? gpu.bf16_tflops : gpu.fp32_tflops;
  }
  return 0;
}

PeakFlops resolve_peak_flops(double peak_tflops, bool half, bool bf16) {
  std::ostringstream basis;
  if (peak_tflops > 0) {
    basis << "peak_tflops";
    return {peak_tflops * 1e12, basis.str()};
  }
  const ComputeDevice device = compute_device();
  if (device.gpu) {
    const double table = known_gpu_peak_tflops(device.name, half);
    if (table > 0) {
      basis << "datasheet peak of " << device.name << ": " << table << " TFLOP/s dense "
            << (half ? "bf16 tensor core" : "fp32 non-tensor");
      return {table * 1e12, basis.str()};
    }
    const double measured = measured_gpu_gemm_flops(half);
    basis << "measured cuBLAS " << (half ? "bf16" : "fp32") << " GEMM rate on " << device.name
          << ", not in the peak table; set peak_tflops for the datasheet figure";
    return {measured, basis.str()};
  }
  if (bf16 && amx::available()) {
    basis << "measured bf16 GEMM rate on AMX tiles";
    return {measured_host_bf16_gemm_flops(), basis.str()};
  }
  basis << "measured fp32 GEMM rate";
  if (const std::string core = blas_core_name(); !core.empty()) basis << " of OpenBLAS core " << core;
  if (const std::string gpu = visible_gpu_name(); !gpu.empty()) {
    basis << " on the host; " << gpu << " is present but the model runs on the host";
  }
  return {measured_host_sgemm_flops(), basis.str()};
}

double peak_flops_per_rank(double peak_tflops) { return resolve_peak_flops(peak_tflops, false).flops; }

}  // namespace shardft
