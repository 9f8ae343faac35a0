// cuDNN fused attention (kernels/cuda/cudnn_attention). Compiled only where cuDNN and cudnn-frontend
// were found (SHARDFT_HAVE_CUDNN).
//  - CudnnAttentionNoDevice: needs no GPU. The graphs of packed causal GQA and MHA shapes (q, k, v dense,
//    and as column blocks of one projection output) pass the
//    frontend's validate() for sm_90 and cuDNN's own descriptor checks; refused shapes name the problem.
//    In a CUDA-Kokkos build on a machine without a GPU run them as
//      SHARDFT_TEST_NO_KOKKOS=1 shardft_unit_tests --gtest_filter='CudnnAttentionNoDevice.*'
//    (a CUDA Kokkos cannot start there; the driver stub lib*/stubs/libcuda.so, linked as libcuda.so.1
//    into a folder on LD_LIBRARY_PATH, lets the binary load).
//  - CudnnAttention: needs a GPU (skipped otherwise). Random bf16 q, k, v, d_o for several packed layouts
//    (segments of length 1, segments longer than 128, GQA, MQA, MHA, head_dim 64 and 128) against a
//    double-precision host reference of causal segment-masked attention computed from the same bf16
//    values. Per segment and tensor: ||gpu - ref|| <= tol ||ref|| + 1e-4 sqrt(n), tol = 1e-2 for o (one
//    bf16 rounding of P and of o) and 2e-2 for dq, dk, dv (dS is rounded to bf16 before both of its GEMMs).
//    Stats against the reference log-sum-exp to 1e-3. Outputs are poisoned (NaN bits) before every call
//    and must be fully overwritten; guard zones around them must stay untouched; a second forward and
//    backward (on another stream) must give the same bits; a repeated shape must build nothing and grow
//    no workspace. The non-deterministic backward is checked against the reference too.
#include <gtest/gtest.h>

#if defined(SHARDFT_HAVE_CUDNN)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bf16.hpp"
#include "kernels/cuda/cublas_gemm.hpp"
#include "kernels/cuda/cudnn_attention.hpp"

namespace shardft {
namespace {

using cuda::SdpaShape;

SdpaShape shape_of(const std::vector<std::int32_t>& lengths, int heads, int kv_heads, int head_dim) {
  SdpaShape s;
  s.segments = static_cast<int>(lengths.size());
  for (int len : lengths) s.tokens += len;
  s.max_segment = *std::max_element(lengths.begin(), lengths.end());
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.scale = 1.f / std::sqrt(static_cast<float>(head_dim));
  return s;
}

// The message of the exception of type E that validating `s` throws ("" if none or another type).
template <class E>
std::string refusal(const SdpaShape& s) {
  try {
    cuda::sdpa_validate_graphs(s);
  } catch (const E& e) {
    return e.what();
  } catch (...) {
  }
  return "";
}

TEST(CudnnAttentionNoDevice, PackedCausalGqaAndMhaGraphsValidateForHopper) {
  const std::string version = cuda::cudnn_version_string();
  EXPECT_EQ(version.rfind("9.", 0), 0u) << "cuDNN " << version;
  const std::vector<std::int32_t> packed = {1, 37, 130, 64, 1, 200};
  std::vector<SdpaShape> shapes = {shape_of(packed, 32, 8, 64), shape_of({129, 1, 63, 256}, 8, 8, 128),
                                   shape_of({1, 1, 1, 300}, 4, 1, 128), shape_of({1}, 32, 8, 64)};
  SdpaShape atomics = shapes[0];
  atomics.deterministic = false;
  shapes.push_back(atomics);
  // q, k and v as column blocks of one [tokens, (32 + 2 * 8) * 64] projection output (and their gradients
  // likewise): every token's row 48 * 64 elements from the next.
  SdpaShape qkv_columns = shapes[0];
  qkv_columns.q_stride = qkv_columns.kv_stride = (32 + 2 * 8) * 64;
  shapes.push_back(qkv_columns);
  for (const SdpaShape& s : shapes) {
    try {
      cuda::sdpa_validate_graphs(s);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "cuDNN " << version << ": " << e.what();
    }
  }
}

TEST(CudnnAttentionNoDevice, RefusedShapesNameTheProblem) {
  const SdpaShape good = shape_of({1, 37, 130}, 32, 8, 64);
  SdpaShape s = good;
  s.heads = 30;
  EXPECT_NE(refusal<std::invalid_argument>(s).find("heads (30) is not a multiple of kv_heads (8)"), std::string::npos);
  s = good;
  s.head_dim = 63;
  EXPECT_NE(refusal<std::invalid_argument>(s).find("head_dim 63 is not a positive multiple of 8"), std::string::npos);
  s = good;
  s.kv_stride = 8 * 64 - 8;
  EXPECT_NE(refusal<std::invalid_argument>(s).find("row stride is narrower than its rows"), std::string::npos);
  s = good;
  s.q_stride = 32 * 64 + 4;
  EXPECT_NE(refusal<std::invalid_argument>(s).find("multiples of 8 elements"), std::string::npos);
  s = good;
  s.tokens = 3 * 130 + 1;
  EXPECT_NE(refusal<std::invalid_argument>(s).find("longer than max_segment"), std::string::npos);
  // Past cuDNN's limit for the backward on Hopper: refused by cuDNN itself, with its own words.
  s = good;
  s.head_dim = 320;
  const std::string why = refusal<std::runtime_error>(s);
  EXPECT_NE(why.find("backward validate"), std::string::npos) << why;
  EXPECT_NE(why.find("hidden_dim"), std::string::npos) << why;
}

TEST(CudnnAttentionNoDevice, SegmentTablesHoldElementOffsets) {
  const SdpaShape s = shape_of({3, 1, 5}, 4, 2, 8);
  const cuda::SdpaSegmentTables t = cuda::sdpa_segment_tables(s, {3, 1, 5});
  EXPECT_EQ(t.lengths, (std::vector<std::int32_t>{3, 1, 5}));
  EXPECT_EQ(t.q_offsets, (std::vector<std::int64_t>{0, 3 * 32, 4 * 32, 9 * 32}));
  EXPECT_EQ(t.kv_offsets, (std::vector<std::int64_t>{0, 3 * 16, 4 * 16, 9 * 16}));
  EXPECT_EQ(t.o_offsets, t.q_offsets);
  EXPECT_EQ(t.stats_offsets, (std::vector<std::int64_t>{0, 3 * 4, 4 * 4, 9 * 4}));
  EXPECT_EQ(cuda::sdpa_stats_elements(s), 9 * 4);
  // q, k, v as column blocks of one [9, 64] array: q, k, v and their gradients step by its rows; o does not.
  SdpaShape packed = s;
  packed.q_stride = packed.kv_stride = 64;
  const cuda::SdpaSegmentTables p = cuda::sdpa_segment_tables(packed, {3, 1, 5});
  EXPECT_EQ(p.q_offsets, (std::vector<std::int64_t>{0, 3 * 64, 4 * 64, 9 * 64}));
  EXPECT_EQ(p.kv_offsets, p.q_offsets);
  EXPECT_EQ(p.o_offsets, t.o_offsets);
  EXPECT_THROW(cuda::sdpa_segment_tables(s, {3, 1, 4}), std::invalid_argument);  // adds up to 8, not 9
  EXPECT_THROW(cuda::sdpa_segment_tables(s, {3, 0, 6}), std::invalid_argument);  // an empty segment
  EXPECT_THROW(cuda::sdpa_segment_tables(s, {9}), std::invalid_argument);        // one length for 3
}

// ---- on a GPU --------------------------------------------------------------------------------------

constexpr const char* kNoDevice = "no CUDA device: the cuDNN attention is compiled and linked but cannot run here";
constexpr std::size_t kGuard = 1024;  // elements of poison on either side of every output

// A device array of n elements inside kGuard elements of guard on each side (all filled with `fill`).
template <class T>
struct Guarded {
  Guarded(std::size_t n_, unsigned char fill) : n(n_) {
    cuda::check_cuda(cudaMalloc(&base, (n + 2 * kGuard) * sizeof(T)), "cudaMalloc");
    poison(fill);
  }
  ~Guarded() { cudaFree(base); }
  void poison(unsigned char fill) {  // done before the call returns: the calls may run on a non-blocking stream
    cuda::check_cuda(cudaMemset(base, fill, (n + 2 * kGuard) * sizeof(T)), "cudaMemset");
    cuda::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after cudaMemset");
  }
  void upload(const std::vector<T>& host) {
    cuda::check_cuda(cudaMemcpy(ptr(), host.data(), n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  std::vector<T> all() const {  // guards included
    std::vector<T> host(n + 2 * kGuard);
    cuda::check_cuda(cudaMemcpy(host.data(), base, host.size() * sizeof(T), cudaMemcpyDeviceToHost), "D2H");
    return host;
  }
  std::vector<T> data() const {
    std::vector<T> a = all();
    return std::vector<T>(a.begin() + kGuard, a.begin() + kGuard + n);
  }
  T* ptr() const { return base + kGuard; }
  T* base = nullptr;
  std::size_t n;
};

// Every output element was written (no poison left) and nothing outside the output was.
template <class T>
void expect_written_in_bounds(const Guarded<T>& buf, const char* name) {
  const std::vector<T> a = buf.all();
  T poison;
  std::memset(&poison, 0xff, sizeof poison);
  auto same = [&](const T& x) { return std::memcmp(&x, &poison, sizeof x) == 0; };
  EXPECT_TRUE(std::all_of(a.begin(), a.begin() + kGuard, same)) << name << ": written before its start";
  EXPECT_TRUE(std::all_of(a.end() - kGuard, a.end(), same)) << name << ": written past its end";
  EXPECT_EQ(std::count_if(a.begin() + kGuard, a.end() - kGuard, same), 0) << name << ": elements left unwritten";
}

struct Reference {
  std::vector<double> o, lse, dq, dk, dv;
};

// Causal segment-masked GQA attention and its gradients, in double, from the bf16 values as floats.
Reference reference(const SdpaShape& s, const std::vector<std::int32_t>& lengths, const std::vector<float>& q,
                    const std::vector<float>& k, const std::vector<float>& v, const std::vector<float>& d_o) {
  const int H = s.heads, G = s.kv_heads, D = s.head_dim, group = H / G;
  Reference r;
  r.o.assign(q.size(), 0.0);
  r.dq.assign(q.size(), 0.0);
  r.dk.assign(k.size(), 0.0);
  r.dv.assign(v.size(), 0.0);
  r.lse.assign(static_cast<std::size_t>(s.tokens) * H, 0.0);
  auto qa = [&](std::int64_t t, int h) { return (t * H + h) * D; };
  auto ka = [&](std::int64_t t, int g) { return (t * G + g) * D; };
  std::int64_t start = 0;
  std::vector<double> p;
  for (int len : lengths) {
    for (int h = 0; h < H; ++h) {
      const int g = h / group;
      for (std::int64_t i = start; i < start + len; ++i) {
        p.assign(static_cast<std::size_t>(i - start + 1), 0.0);
        double m = -INFINITY, sum = 0, delta = 0;
        for (std::int64_t j = start; j <= i; ++j) {
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += double(q[qa(i, h) + d]) * k[ka(j, g) + d];
          p[j - start] = s.scale * dot;
          m = std::max(m, p[j - start]);
        }
        for (double& x : p) sum += (x = std::exp(x - m));
        r.lse[i * H + h] = m + std::log(sum);
        for (std::int64_t j = start; j <= i; ++j) {
          p[j - start] /= sum;
          for (int d = 0; d < D; ++d) r.o[qa(i, h) + d] += p[j - start] * v[ka(j, g) + d];
        }
        for (int d = 0; d < D; ++d) delta += double(d_o[qa(i, h) + d]) * r.o[qa(i, h) + d];
        for (std::int64_t j = start; j <= i; ++j) {
          double dp = 0;
          for (int d = 0; d < D; ++d) dp += double(d_o[qa(i, h) + d]) * v[ka(j, g) + d];
          const double ds = p[j - start] * (dp - delta) * s.scale, pj = p[j - start];
          for (int d = 0; d < D; ++d) {
            r.dq[qa(i, h) + d] += ds * k[ka(j, g) + d];
            r.dk[ka(j, g) + d] += ds * q[qa(i, h) + d];
            r.dv[ka(j, g) + d] += pj * d_o[qa(i, h) + d];
          }
        }
      }
    }
    start += len;
  }
  return r;
}

// Per segment (its rows of `width` values): ||got - ref|| <= tol ||ref|| + 1e-4 sqrt(n).
void expect_close(const char* name, const std::vector<float>& got, const std::vector<double>& ref,
                  const std::vector<std::int32_t>& lengths, std::size_t width, double tol) {
  std::size_t row = 0;
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    double err = 0, norm = 0;
    const std::size_t begin = row * width, end = (row + lengths[b]) * width;
    for (std::size_t i = begin; i < end; ++i) {
      err += (got[i] - ref[i]) * (got[i] - ref[i]);
      norm += ref[i] * ref[i];
    }
    const double bound = tol * std::sqrt(norm) + 1e-4 * std::sqrt(double(end - begin));
    EXPECT_LE(std::sqrt(err), bound) << name << ", segment " << b << " (" << lengths[b] << " tokens): |ref| "
                                     << std::sqrt(norm);
    row += lengths[b];
  }
}

std::vector<float> widen(const std::vector<std::uint16_t>& bits) {
  std::vector<float> f(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) f[i] = bf16::to_float(bits[i]);
  return f;
}

std::vector<std::uint16_t> random_bf16(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<std::uint16_t> bits(n);
  for (auto& b : bits) b = bf16::round_bits(dist(rng));
  return bits;
}

struct Outputs {
  std::vector<std::uint16_t> o, dq, dk, dv;
  std::vector<float> stats;
};

void check_case(const std::vector<std::int32_t>& lengths, int heads, int kv_heads, int head_dim,
                bool deterministic = true) {
  SdpaShape s = shape_of(lengths, heads, kv_heads, head_dim);
  s.deterministic = deterministic;
  SCOPED_TRACE(::testing::Message() << "segments " << ::testing::PrintToString(lengths) << ", heads " << heads << "/"
                                    << kv_heads << ", head_dim " << head_dim
                                    << (deterministic ? "" : ", non-deterministic backward") << "; cuDNN "
                                    << cuda::cudnn_version_string() << " on " << cuda::device_name());
  const std::size_t nq = s.tokens * heads * head_dim, nk = s.tokens * kv_heads * head_dim;
  std::mt19937 rng(static_cast<unsigned>(nq + nk));
  const auto q = random_bf16(nq, rng), k = random_bf16(nk, rng), v = random_bf16(nk, rng), d_o = random_bf16(nq, rng);
  const cuda::SdpaSegmentTables tables = cuda::sdpa_segment_tables(s, lengths);
  Guarded<std::int32_t> lens(tables.lengths.size(), 0);
  Guarded<std::int64_t> q_off(tables.q_offsets.size(), 0), kv_off(tables.kv_offsets.size(), 0),
      o_off(tables.o_offsets.size(), 0), st_off(tables.stats_offsets.size(), 0);
  lens.upload(tables.lengths);
  q_off.upload(tables.q_offsets);
  kv_off.upload(tables.kv_offsets);
  o_off.upload(tables.o_offsets);
  st_off.upload(tables.stats_offsets);
  const cuda::SdpaSegments seg{lens.ptr(), q_off.ptr(), kv_off.ptr(), o_off.ptr(), st_off.ptr()};
  Guarded<std::uint16_t> dq_(nq, 0), dk_(nk, 0), dv_(nk, 0), o_(nq, 0), dO(nq, 0), Q(nq, 0), K(nk, 0), V(nk, 0);
  Guarded<float> stats_(static_cast<std::size_t>(cuda::sdpa_stats_elements(s)), 0);
  Q.upload(q);
  K.upload(k);
  V.upload(v);
  dO.upload(d_o);

  auto run = [&](cudaStream_t stream) {
    for (auto* b : {&o_, &dq_, &dk_, &dv_}) b->poison(0xff);
    stats_.poison(0xff);
    cuda::sdpa_forward(s, seg, Q.ptr(), K.ptr(), V.ptr(), o_.ptr(), stats_.ptr(), stream);
    cuda::sdpa_backward(s, seg, Q.ptr(), K.ptr(), V.ptr(), o_.ptr(), dO.ptr(), stats_.ptr(), dq_.ptr(), dk_.ptr(),
                        dv_.ptr(), stream);
    cuda::check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize after forward and backward");
    for (auto [b, name] : {std::pair{&o_, "o"}, {&dq_, "dq"}, {&dk_, "dk"}, {&dv_, "dv"}})
      expect_written_in_bounds(*b, name);
    expect_written_in_bounds(stats_, "stats");
    return Outputs{o_.data(), dq_.data(), dk_.data(), dv_.data(), stats_.data()};
  };
  // The first run on the legacy default stream, the second on a stream of its own: the handle follows.
  const Outputs first = run(nullptr);
  const cuda::SdpaCacheStats after_first = cuda::sdpa_cache_stats();
  cudaStream_t stream = nullptr;
  cuda::check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const Outputs second = run(stream);
  cuda::check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
  const cuda::SdpaCacheStats after_second = cuda::sdpa_cache_stats();
  EXPECT_EQ(after_second.builds, after_first.builds) << "a repeated shape rebuilt its graphs";
  EXPECT_EQ(after_second.workspace_bytes, after_first.workspace_bytes) << "a repeated shape grew the workspace";
  EXPECT_TRUE(first.o == second.o && first.stats == second.stats) << "forward not reproducible";
  if (deterministic) {
    EXPECT_TRUE(first.dq == second.dq && first.dk == second.dk && first.dv == second.dv)
        << "deterministic backward gave different bits on a second run";
  }

  const Reference r = reference(s, lengths, widen(q), widen(k), widen(v), widen(d_o));
  expect_close("o", widen(first.o), r.o, lengths, heads * head_dim, 1e-2);
  expect_close("dq", widen(first.dq), r.dq, lengths, heads * head_dim, 2e-2);
  expect_close("dk", widen(first.dk), r.dk, lengths, kv_heads * head_dim, 2e-2);
  expect_close("dv", widen(first.dv), r.dv, lengths, kv_heads * head_dim, 2e-2);
  int bad = 0;
  for (std::size_t i = 0; i < r.lse.size(); ++i) {
    if (!(std::fabs(first.stats[i] - r.lse[i]) <= 1e-3 * (1 + std::fabs(r.lse[i]))) && ++bad <= 5)
      ADD_FAILURE() << "stats[" << i << "] = " << first.stats[i] << ", reference log-sum-exp " << r.lse[i];
  }
}

TEST(CudnnAttention, GqaHeadDim64MatchesHostReference) {
  if (cuda::device_count() == 0) GTEST_SKIP() << kNoDevice;
  check_case({1, 37, 130, 64, 1, 200}, 32, 8, 64);
}

TEST(CudnnAttention, MhaHeadDim128MatchesHostReference) {
  if (cuda::device_count() == 0) GTEST_SKIP() << kNoDevice;
  check_case({129, 1, 63, 256}, 8, 8, 128);
}

// cuDNN's default (atomics) backward, kept working for runs that trade reproducibility for workspace.
TEST(CudnnAttention, NonDeterministicBackwardMatchesHostReference) {
  if (cuda::device_count() == 0) GTEST_SKIP() << kNoDevice;
  check_case({1, 37, 130, 64, 1, 200}, 32, 8, 64, false);
}

TEST(CudnnAttention, MqaWithSingleTokenSegmentsMatchesHostReference) {
  if (cuda::device_count() == 0) GTEST_SKIP() << kNoDevice;
  check_case({1, 1, 1, 300}, 4, 1, 128);
  check_case({1}, 16, 2, 64);
}

}  // namespace
}  // namespace shardft
#endif  // SHARDFT_HAVE_CUDNN
