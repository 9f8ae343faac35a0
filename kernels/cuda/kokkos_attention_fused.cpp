// kernels/attention_fused.hpp on cuDNN's SDPA graphs (kernels/cuda/cudnn_attention), in a build whose
// Kokkos runs on CUDA and that found cuDNN and cudnn-frontend.
#include "kernels/attention_fused.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cublas_gemm.hpp"
#include "kernels/cuda/cudnn_attention.hpp"
#include "kernels/kernel_scratch.hpp"
#include "kernels/kernel_timer.hpp"

namespace shardft {

namespace {

// Row strides of q (and dq) and of k, v (and dk, dv) in elements, as the attention_fused.hpp contract
// allows them: each dense, or all three one row stride.
struct RowStrides {
  std::int64_t q = 0, kv = 0;
};

RowStrides row_strides(const AttentionShape& s, Strided2<const bf16> q, Strided2<const bf16> k,
                       Strided2<const bf16> v, const char* call) {
  if (q.stride_1() != 1 || k.stride_1() != 1 || v.stride_1() != 1)
    throw std::invalid_argument(std::string(call) + ": each row of q, k and v must be contiguous");
  const std::int64_t qd = static_cast<std::int64_t>(s.heads) * s.head_dim;
  const std::int64_t kvd = static_cast<std::int64_t>(s.kv_heads) * s.head_dim;
  const auto stride = [](const Strided2<const bf16>& x) { return static_cast<std::int64_t>(x.stride_0()); };
  const bool dense = stride(q) == qd && stride(k) == kvd && stride(v) == kvd;
  const bool packed = stride(q) == stride(k) && stride(k) == stride(v);
  if (!dense && !packed)
    throw std::invalid_argument(std::string(call) + ": q, k and v must each be dense or all share one row stride");
  return {stride(q), stride(k)};
}

void check_same_layout(const Strided2<const bf16>& x, const Strided2<bf16>& dx, const char* name, const char* call) {
  if (x.stride_0() != dx.stride_0() || dx.stride_1() != 1)
    throw std::invalid_argument(std::string(call) + ": d" + name + " must have " + name + "'s row stride");
}

cuda::SdpaShape sdpa_shape(const AttentionShape& s, const AttentionSegments& seg, RowStrides strides = {}) {
  cuda::SdpaShape out;
  out.tokens = static_cast<std::int64_t>(s.batch) * s.seq;
  out.segments = seg.count;
  out.max_segment = seg.max_length;
  out.heads = s.heads;
  out.kv_heads = s.kv_heads;
  out.head_dim = s.head_dim;
  out.scale = 1.f / std::sqrt(static_cast<float>(s.head_dim));
  out.deterministic = s.deterministic_backward;
  out.q_stride = strides.q;
  out.kv_stride = strides.kv;
  return out;
}

// cuDNN's segment arrays (cuda::SdpaSegments) from the segments' starts, made on the device by one small
// kernel; kept until the next call with other segments or another head layout, so the layers of one
// micro-batch share them.
struct SegmentTables {
  std::uint64_t version = 0;
  int heads = 0, kv_heads = 0, head_dim = 0;
  RowStrides strides;
  cuda::SdpaSegments arrays;
};

const cuda::SdpaSegments& segment_tables(const AttentionShape& s, const AttentionSegments& seg, RowStrides rows) {
  static SegmentTables cached;
  if (seg.version != 0 && cached.version == seg.version && cached.heads == s.heads && cached.kv_heads == s.kv_heads &&
      cached.head_dim == s.head_dim && cached.strides.q == rows.q && cached.strides.kv == rows.kv) {
    return cached.arrays;
  }
  const std::size_t n = static_cast<std::size_t>(seg.count);
  const auto lengths = kernel_scratch<std::int32_t>("sdpa_segment_lengths", n);
  const auto q_off = kernel_scratch<std::int64_t>("sdpa_q_offsets", n + 1);
  const auto kv_off = kernel_scratch<std::int64_t>("sdpa_kv_offsets", n + 1);
  const auto o_off = kernel_scratch<std::int64_t>("sdpa_o_offsets", n + 1);
  const auto stats_off = kernel_scratch<std::int64_t>("sdpa_stats_offsets", n + 1);
  const auto starts = seg.starts;
  const std::int64_t q_row = rows.q, kv_row = rows.kv, o_row = static_cast<std::int64_t>(s.heads) * s.head_dim;
  const std::int64_t heads = s.heads;
  const int count = seg.count;
  Kokkos::parallel_for(
      "attention_segment_tables", Range(0, count + 1), KOKKOS_LAMBDA(const std::int64_t i) {
        const std::int64_t start = starts(i);
        q_off(i) = start * q_row;
        kv_off(i) = start * kv_row;
        o_off(i) = start * o_row;
        stats_off(i) = start * heads;
        if (i < count) lengths(i) = starts(i + 1) - starts(i);
      });
  cached = {seg.version, s.heads, s.kv_heads, s.head_dim, rows,
            {lengths.data(), q_off.data(), kv_off.data(), o_off.data(), stats_off.data()}};
  return cached.arrays;
}

const std::uint16_t* bits(const bf16* p) { return reinterpret_cast<const std::uint16_t*>(p); }
std::uint16_t* bits(bf16* p) { return reinterpret_cast<std::uint16_t*>(p); }
cudaStream_t stream() { return ExecSpace().cuda_stream(); }

}  // namespace

bool fused_attention_built() { return cuda::device_count() > 0; }

bool fused_attention_compiled() { return true; }

std::string fused_attention_backend() {
  return "cuDNN " + cuda::cudnn_version_string() + " SDPA" + (cuda::device_count() > 0 ? "" : " (no CUDA device here)");
}

std::int64_t fused_attention_stats_size(const AttentionShape& s, const AttentionSegments& seg) {
  return cuda::sdpa_stats_elements(sdpa_shape(s, seg));
}

void fused_attention_prepare(const AttentionShape& s, const AttentionSegments& seg, bool column_blocks) {
  const std::int64_t qd = static_cast<std::int64_t>(s.heads) * s.head_dim;
  const std::int64_t kvd = static_cast<std::int64_t>(s.kv_heads) * s.head_dim;
  const RowStrides rows = column_blocks ? RowStrides{qd + 2 * kvd, qd + 2 * kvd} : RowStrides{qd, kvd};
  segment_tables(s, seg, rows);
}

void fused_attention_forward(const AttentionShape& s, const AttentionSegments& seg, Strided2<const bf16> q,
                             Strided2<const bf16> k, Strided2<const bf16> v, Unmanaged2<bf16> o,
                             Unmanaged1<float> stats) {
  const RowStrides rows = row_strides(s, q, k, v, "fused_attention_forward");
  const cuda::SdpaSegments& tables = segment_tables(s, seg, rows);
  const VendorKernel launch("cuDNN SDPA forward");
  cuda::sdpa_forward(sdpa_shape(s, seg, rows), tables, bits(q.data()), bits(k.data()), bits(v.data()),
                     bits(o.data()), stats.data(), stream());
}

void fused_attention_backward(const AttentionShape& s, const AttentionSegments& seg, Strided2<const bf16> q,
                              Strided2<const bf16> k, Strided2<const bf16> v, Unmanaged2<const bf16> o,
                              Unmanaged2<const bf16> dout, Unmanaged1<const float> stats, Strided2<bf16> dq,
                              Strided2<bf16> dk, Strided2<bf16> dv) {
  constexpr const char* call = "fused_attention_backward";
  const RowStrides rows = row_strides(s, q, k, v, call);
  check_same_layout(q, dq, "q", call);
  check_same_layout(k, dk, "k", call);
  check_same_layout(v, dv, "v", call);
  const cuda::SdpaSegments& tables = segment_tables(s, seg, rows);
  const VendorKernel launch("cuDNN SDPA backward");
  cuda::sdpa_backward(sdpa_shape(s, seg, rows), tables, bits(q.data()), bits(k.data()), bits(v.data()),
                      bits(o.data()), bits(dout.data()), stats.data(), bits(dq.data()), bits(dk.data()),
                      bits(dv.data()), stream());
}

}  // namespace shardft
