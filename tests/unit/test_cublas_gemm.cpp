// The cuBLAS GEMM (kernels/cuda/cublas_gemm) against the host sgemm: all four transpose combinations,
// non-square shapes, padded leading dimensions, alpha and beta; fp32 inputs and bf16 inputs (against
// the host sgemm of the bf16-rounded inputs), both to 1e-5 of the magnitude of the terms summed.
// Compiled only in CUDA builds; skipped where the process sees no CUDA device.
#include <gtest/gtest.h>

#if defined(SHARDFT_HAVE_CUDA)
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bf16.hpp"
#include "kernels/cuda/cublas_gemm.hpp"
#include "kernels/gemm.hpp"
#include "kernels/side_queue.hpp"

namespace shardft {
namespace {

constexpr const char* kNoDevice = "no CUDA device: the cuBLAS GEMM is compiled and linked but cannot run here";

template <class T>
struct DeviceBuffer {
  explicit DeviceBuffer(const std::vector<T>& host) : n(host.size()) {
    cuda::check_cuda(cudaMalloc(&ptr, n * sizeof(T)), "cudaMalloc");
    cuda::check_cuda(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  std::vector<T> to_host() const {
    std::vector<T> host(n);
    cuda::check_cuda(cudaMemcpy(host.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return host;
  }
  T* ptr = nullptr;
  std::size_t n;
};

struct Case {
  bool ta, tb;
  int m, n, k;
  float alpha, beta;
};

std::string describe(const Case& c) {
  return std::string("op(A)=") + (c.ta ? "T" : "N") + " op(B)=" + (c.tb ? "T" : "N") + " M=" + std::to_string(c.m) +
         " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) + " alpha=" + std::to_string(c.alpha) +
         " beta=" + std::to_string(c.beta);
}

// Runs one case on the device (fp32 or bf16 inputs) and on the host, and compares element by element:
// |gpu - cpu| <= 1e-5 * (|alpha| sum_k |op(A)_ik op(B)_kj| + |beta c_ij|) (+ a denormal floor).
void check_case(const Case& c, bool bf16_inputs, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  const int rows_a = c.ta ? c.k : c.m, cols_a = c.ta ? c.m : c.k;
  const int rows_b = c.tb ? c.n : c.k, cols_b = c.tb ? c.k : c.n;
  const int lda = cols_a + 3, ldb = cols_b + 1, ldc = c.n + 2;  // padded rows: leading dimensions matter
  std::vector<float> a(static_cast<std::size_t>(rows_a) * lda), b(static_cast<std::size_t>(rows_b) * ldb),
      c0(static_cast<std::size_t>(c.m) * ldc);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  for (float& x : c0) x = dist(rng);
  if (bf16_inputs) {
    for (float& x : a) x = round_to_bf16(x);
    for (float& x : b) x = round_to_bf16(x);
  }

  // Host reference: the same sgemm the CPU build runs.
  std::vector<float> expect = c0;
  gemm_ld(c.ta ? Op::T : Op::N, c.tb ? Op::T : Op::N, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta,
          expect.data(), ldc);

  DeviceBuffer<float> dc(c0);
  if (bf16_inputs) {
    std::vector<std::uint16_t> a16(a.size()), b16(b.size());
    for (std::size_t i = 0; i < a.size(); ++i) a16[i] = bf16::round_bits(a[i]);
    for (std::size_t i = 0; i < b.size(); ++i) b16[i] = bf16::round_bits(b[i]);
    DeviceBuffer<std::uint16_t> da(a16), db(b16);
    cuda::gemm_bf16_f32(c.ta, c.tb, c.m, c.n, c.k, c.alpha, da.ptr, lda, db.ptr, ldb, c.beta, dc.ptr, ldc);
    cuda::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  } else {
    DeviceBuffer<float> da(a), db(b);
    cuda::sgemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, da.ptr, lda, db.ptr, ldb, c.beta, dc.ptr, ldc);
    cuda::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  const std::vector<float> got = dc.to_host();

  auto at = [](const std::vector<float>& x, int ld, int r, int col) { return x[static_cast<std::size_t>(r) * ld + col]; };
  int bad = 0;
  for (int i = 0; i < c.m; ++i) {
    for (int j = 0; j < c.n; ++j) {
      double scale = 0;
      for (int p = 0; p < c.k; ++p) {
        const double aip = c.ta ? at(a, lda, p, i) : at(a, lda, i, p);
        const double bpj = c.tb ? at(b, ldb, j, p) : at(b, ldb, p, j);
        scale += std::fabs(aip * bpj);
      }
      scale = std::fabs(c.alpha) * scale + std::fabs(c.beta * at(c0, ldc, i, j));
      const double err = std::fabs(double(at(got, ldc, i, j)) - at(expect, ldc, i, j));
      if (err > 1e-5 * scale + 1e-30 && ++bad <= 5) {
        ADD_FAILURE() << describe(c) << (bf16_inputs ? " bf16" : " fp32") << ": C[" << i << "," << j
                      << "] = " << at(got, ldc, i, j) << ", host " << at(expect, ldc, i, j) << ", |diff| " << err
                      << " > 1e-5 * " << scale;
      }
    }
  }
  // The padding between rows of C is not part of the product: it must come back untouched.
  for (int i = 0; i < c.m; ++i) {
    for (int j = c.n; j < ldc; ++j) ASSERT_EQ(at(got, ldc, i, j), at(c0, ldc, i, j)) << describe(c) << " padding";
  }
  EXPECT_EQ(bad, 0) << describe(c);
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      all.push_back({ta, tb, 37, 53, 71, 1.f, 0.f});
      all.push_back({ta, tb, 64, 19, 130, 0.75f, -0.5f});
      all.push_back({ta, tb, 5, 96, 1, -1.25f, 1.f});
    }
  }
  return all;
}

TEST(CublasGemm, Fp32MatchesHostSgemmForEveryTransposeCombination) {
  if (cuda::device_count() == 0) GTEST_SKIP() << kNoDevice;
  std::mt19937 rng(7);
  for (const Case& c : cases()) check_case(c, false, rng);
}

TEST(CublasGemm, Bf16InputsMatchHostSgemmOfRoundedInputs) {
  if (cuda::device_count() == 0) GTEST_SKIP() << kNoDevice;
  std::mt19937 rng(11);
  for (const Case& c : cases()) check_case(c, true, rng);
}

TEST(CublasGemm, KZeroScalesCByBeta) {
  if (cuda::device_count() == 0) GTEST_SKIP() << kNoDevice;
  std::vector<float> c0 = {1, -2, 3, 4, 5, -6};
  DeviceBuffer<float> dc(c0);
  cuda::sgemm(false, false, 2, 3, 0, 1.f, nullptr, 0, nullptr, 3, 0.5f, dc.ptr, 3);
  const std::vector<float> got = dc.to_host();
  for (std::size_t i = 0; i < c0.size(); ++i) EXPECT_FLOAT_EQ(got[i], 0.5f * c0[i]);
}

#if defined(KOKKOS_ENABLE_CUDA)
// The GPU build's gemm() on device views goes through cuBLAS: same product as the host sgemm.
TEST(CublasGemm, KokkosGemmDispatchesToCublasOnDeviceViews) {
  if (cuda::device_count() == 0) GTEST_SKIP() << kNoDevice;
  const int m = 17, n = 23, k = 29;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  View2<float> a("a", m, k), b("b", n, k), c("c", m, n);
  auto ha = Kokkos::create_mirror_view(a);
  auto hb = Kokkos::create_mirror_view(b);
  for (int i = 0; i < m; ++i)
    for (int p = 0; p < k; ++p) ha(i, p) = dist(rng);
  for (int j = 0; j < n; ++j)
    for (int p = 0; p < k; ++p) hb(j, p) = dist(rng);
  Kokkos::deep_copy(a, ha);
  Kokkos::deep_copy(b, hb);
  gemm(Op::N, Op::T, 1.f, a, b, 0.f, c);  // c = a b^T: a linear layer
  auto hc = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), c);
  std::vector<float> expect(static_cast<std::size_t>(m) * n);
  gemm_ld(Op::N, Op::T, m, n, k, 1.f, ha.data(), k, hb.data(), k, 0.f, expect.data(), n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) EXPECT_NEAR(hc(i, j), expect[static_cast<std::size_t>(i) * n + j], 1e-5 * k);
}

// A side queue with SMs reserved (optimizer_overlap_sms): from its first pending mark until the compute
// stream has waited for its last, the GEMMs target the GPU's SMs less the reserve, then all of them.
TEST(CublasGemm, SideQueueWorkLeavesItsReservedSmsFreeOfGemms) {
  if (cuda::device_count() == 0) GTEST_SKIP() << kNoDevice;
  const int sms = cuda::sm_count();
  ASSERT_GT(sms, 8);
  const auto target = [] {
    int t = -1;
    cuda::check_cublas(cublasGetSmCountTarget(cuda::cublas_handle(), &t), "cublasGetSmCountTarget");
    return t;
  };
  EXPECT_THROW(SideQueue(1, sms), std::invalid_argument) << "no SM left to the GEMMs";
  SideQueue side(2, 8);
  EXPECT_EQ(target(), 0);
  side.mark(0);
  EXPECT_EQ(target(), sms - 8);
  side.mark(1);
  side.wait_for(0);
  EXPECT_EQ(target(), sms - 8) << "mark 1 is still pending";
  side.wait_for(1);
  EXPECT_EQ(target(), 0);
  side.wait_for(1);  // nothing pending
  EXPECT_EQ(target(), 0);
  side.mark(1);
  side.wait_for_all();
  EXPECT_EQ(target(), 0);
}
#endif

}  // namespace
}  // namespace shardft
#endif  // SHARDFT_HAVE_CUDA
