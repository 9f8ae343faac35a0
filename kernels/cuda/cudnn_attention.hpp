#pragma once
// Causal grouped-query attention on cuDNN's fused flash-attention kernels (SDPA), through NVIDIA's
// header-only cudnn-frontend graph API. GPU builds with cuDNN only (SHARDFT_HAVE_CUDNN); host code only,
// like cublas_gemm.cpp (no device code of ours, no Kokkos).
//
// Math (the same as kernels/attention_lse.hpp, with scale in place of 1/sqrt(hd)):
//   S_ij = scale * q_i . k_j  for key j <= query i of the same segment (top-left causal diagonal within
//   each packed segment; no token ever sees another segment), P = softmax_j(S), o_i = sum_j P_ij v_j.
//   Query head h reads kv head h / (heads / kv_heads) (Llama's repeat_kv grouping).
//
// Layout: one call covers `segments` packed sequences stored back to back, token-major, as the model
// holds them (bf16 bits as std::uint16_t, row-major):
//   q, dq           [tokens, heads * head_dim]      element (t, h, d) at t * q_stride + h * head_dim + d
//   k, v, dk, dv    [tokens, kv_heads * head_dim]   element (t, g, d) at t * kv_stride + g * head_dim + d
//   o, d_o          [tokens, heads * head_dim]      element (t, h, d) at (t * heads + h) * head_dim + d
// The row strides q_stride and kv_stride are heads * head_dim and kv_heads * head_dim (dense), or wider:
// q, k and v as column blocks of one [tokens, (heads + 2 kv_heads) * head_dim] projection output, read and
// their gradients written in place with no copy. cuDNN sees this as its ragged "THD" layout: per segment a
// [heads, L, head_dim] tensor with strides (head_dim, row stride, 1) starting at a ragged offset and
// masked to the segment's length, L being the graph's sequence length (below).
//
// Stats (forward output, backward input): fp32 log-sum-exp of each query row's scaled scores,
// stats[t * heads + h] = ln sum_{j visible from t} exp(S_tj) (natural log, scale included), ragged like q:
// sdpa_stats_elements(shape) = tokens * heads floats. The caller only keeps it for the backward.
//
// Graphs (forward and backward together) are built once per distinct SdpaShape (the graph's sequence
// length L is max_segment rounded up to 64, and the backward's token bound tokens rounded up to 64,
// so nearby shapes share graphs) and kept in a process-wide LRU cache of 64 entries. One cuDNN handle
// per process, created on first use (needs a device) and bound to the given stream at every call. One
// device workspace, grown to the largest plan's need and reused: a call whose shape was seen before
// allocates nothing and copies nothing to or from the host.
//
// Backward determinism: with SdpaShape::deterministic (the default), the backward graph asks for
// cuDNN's deterministic algorithm. On Hopper (cuDNN 9.x, frontend 1.23) that is the "dP workspace"
// form: dS is stored in the workspace and dQ is a separate ordered GEMM, no fp32 atomics, so dq, dk, dv
// are bitwise reproducible. Its workspace grows with the square of the sequence: up to about segments *
// heads * L^2 * 2 bytes with L the graph's sequence length (above); cuDNN sizes it and
// sdpa_cache_stats() reports the buffer. deterministic = false selects cuDNN's default backward
// (fp32 atomics for dq: workspace linear in tokens, results not reproducible bit for bit).
//
// Errors: every cuDNN, cudnn-frontend or CUDA failure throws std::runtime_error naming the operation,
// the shape and the frontend's message. Shapes and pointers are checked here first, where cuDNN's own
// message would be obscure (std::invalid_argument: null or misaligned pointers, heads not a multiple of
// kv_heads, head_dim not a multiple of 8, segments that cannot fit max_segment). For cuDNN's own view
// of a failure set CUDNN_FRONTEND_LOG_INFO=1 CUDNN_FRONTEND_LOG_FILE=stderr (frontend) and
// CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=stderr (backend).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shardft::cuda {

struct SdpaShape {
  std::int64_t tokens = 0;  // rows of q: every segment's tokens, back to back
  int segments = 0;         // packed sequences in this call; each has at least one token
  int max_segment = 0;      // >= the longest segment's length (need not be tight; part of the cache key)
  int heads = 0;            // query heads
  int kv_heads = 0;         // key/value heads; heads must be a multiple of it
  int head_dim = 0;         // a multiple of 8, at most 256 (cuDNN's limit for the backward on Hopper)
  float scale = 0.f;        // multiplies q . k before the softmax (1/sqrt(head_dim) for Llama)
  bool deterministic = true;  // bitwise-reproducible backward (see above)
  // Elements from one token's row to the next in q and dq, and in k, v, dk and dv (see Layout); 0: dense.
  // Multiples of 8 (16-byte rows), at least the dense width.
  std::int64_t q_stride = 0, kv_stride = 0;
  std::int64_t q_row() const { return q_stride > 0 ? q_stride : static_cast<std::int64_t>(heads) * head_dim; }
  std::int64_t kv_row() const { return kv_stride > 0 ? kv_stride : static_cast<std::int64_t>(kv_heads) * head_dim; }
};

// Device arrays describing the segments of one call, filled by the caller (see sdpa_segment_tables for
// the same values computed on the host). With start_b = the first token of segment b (start_0 = 0,
// start_{b+1} = start_b + lengths[b], start_segments = tokens):
struct SdpaSegments {
  const std::int32_t* lengths = nullptr;        // [segments] int32: tokens in segment b (1..max_segment)
  const std::int64_t* q_offsets = nullptr;      // [segments+1] int64 ELEMENTS: start_b * q_row() (q, dq)
  const std::int64_t* kv_offsets = nullptr;     // [segments+1] int64 ELEMENTS: start_b * kv_row()
                                                //   (k, v, dk, dv)
  const std::int64_t* o_offsets = nullptr;      // [segments+1] int64 ELEMENTS: start_b * heads * head_dim
                                                //   (o, d_o)
  const std::int64_t* stats_offsets = nullptr;  // [segments+1] int64 ELEMENTS: start_b * heads (stats)
};

// The five arrays of SdpaSegments for the given segment lengths, on the host. Throws unless the lengths
// are `shape.segments` values in 1..max_segment adding up to `shape.tokens`.
struct SdpaSegmentTables {
  std::vector<std::int32_t> lengths;
  std::vector<std::int64_t> q_offsets, kv_offsets, o_offsets, stats_offsets;
};
SdpaSegmentTables sdpa_segment_tables(const SdpaShape& shape, const std::vector<std::int32_t>& lengths);

// Floats the caller provides for stats: tokens * heads.
std::int64_t sdpa_stats_elements(const SdpaShape& shape);

// o and stats are written in full; q, k, v are read. All pointers are device memory, the bf16 and fp32
// arrays 16-byte aligned (cuDNN's tensors are); the call is asynchronous on `stream` (the buffers must
// stay valid until the stream reaches it).
void sdpa_forward(const SdpaShape& shape, const SdpaSegments& segments, const std::uint16_t* q, const std::uint16_t* k,
                  const std::uint16_t* v, std::uint16_t* o, float* stats, cudaStream_t stream);

// dq, dk, dv are overwritten (not accumulated into). o and stats are the forward's outputs for the same
// q, k, v; d_o is the gradient of the loss with respect to o.
void sdpa_backward(const SdpaShape& shape, const SdpaSegments& segments, const std::uint16_t* q,
                   const std::uint16_t* k, const std::uint16_t* v, const std::uint16_t* o, const std::uint16_t* d_o,
                   const float* stats, std::uint16_t* dq, std::uint16_t* dk, std::uint16_t* dv, cudaStream_t stream);

// The cuDNN library this process runs with (cudnnGetVersion), e.g. "9.19.0"; needs no device.
std::string cudnn_version_string();

// The check that needs no GPU: builds the forward and backward graphs for this shape as for sm_90
// (Hopper) and runs
//  - the frontend's validate(): this file's shape checks, the frontend's support rules for sm_90 and the
//    loaded cuDNN version (head dims, GQA head counts, ragged layout with padding mask, causal band,
//    deterministic backward, ragged stats), and the inference of every internal tensor's properties;
//  - build_operation_graph without a handle (cuDNN >= 9.8): the cuDNN library itself finalizes every
//    backend tensor (ragged offsets included) and operation descriptor and the operation graph.
// Not checked without a device: the engine heuristics (they need the device's properties), whether an
// engine supports the graph (check_support), kernel compilation, workspace sizes and the results.
// Throws std::invalid_argument for a shape refused by this file's own checks and std::runtime_error
// with the frontend's message for one refused by cuDNN.
void sdpa_validate_graphs(const SdpaShape& shape);

// For tests and logs: graphs cached now, graph pairs built so far, bytes of the shared workspace.
struct SdpaCacheStats {
  int cached = 0;
  std::int64_t builds = 0;
  std::size_t workspace_bytes = 0;
};
SdpaCacheStats sdpa_cache_stats();

}  // namespace shardft::cuda
