#pragma once
// Internal to kernels/cuda/cudnn_attention*.cpp: the cudnn-frontend graphs of the fused attention (the
// public API and its contract are in cudnn_attention.hpp). Includes cudnn-frontend, so no other folder
// includes this file.
#include <cstring>  // before the frontend: its shim calls std::strlen without including <cstring>

#include <cudnn_frontend.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <string>

#include "kernels/cuda/cudnn_attention.hpp"

namespace shardft::cuda::sdpa_detail {

namespace fe = cudnn_frontend;
using GraphPtr = std::shared_ptr<fe::graph::Graph>;

// Tensor UIDs: the keys of the variant packs. Shared by both graphs where the tensor is the same.
enum Uid : std::int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kSeqLenQ,
  kSeqLenKV,
  kQOffsets,
  kKOffsets,
  kVOffsets,
  kOOffsets,
  kStatsOffsets,
};

// What a graph depends on: the cache key. b = segments, s = the sequence dimension (max_segment rounded
// up to 64: the padding mask, not s, bounds each segment, so nearby maxima share graphs), h / g = query /
// kv heads, d = head_dim, q_row / kv_row = their token strides, max_total = tokens rounded up to 64 (the backward sizes its token-packed fp32
// scratch from it, as cuDNN's own ragged tests do).
struct GraphDims {
  std::int64_t b = 0, s = 0, h = 0, g = 0, d = 0, max_total = 0;
  std::int64_t q_row = 0, kv_row = 0;  // token strides of q / dq and of k, v / dk, dv (SdpaShape::q_row())
  float scale = 0.f;
  bool deterministic = true;
  bool operator==(const GraphDims& o) const;
  std::string describe() const;  // "B=3 S=128 H=32 G=8 d=64 T<=448 scale=0.125 deterministic" (+ strides)
};
GraphDims graph_dims(const SdpaShape& shape);

// Throws std::runtime_error("cuDNN SDPA <graph> <step> (<dims>): <code>: <message>") unless status is OK.
void check(fe::error_t status, const char* graph, const char* step, const GraphDims& dims);
[[noreturn]] void rethrow(const char* graph, const char* step, const GraphDims& dims, const std::exception& e);

// Runs one frontend call returning fe::error_t; a failure or an exception (some frontend paths throw)
// becomes one std::runtime_error naming the graph, the step and the shape.
template <class Call>
fe::error_t call_guarded(const char* graph, const char* step, const GraphDims& dims, Call&& call) {
  try {
    return call();
  } catch (const std::exception& e) {
    rethrow(graph, step, dims, e);
  }
}
template <class Call>
void run_step(const char* graph, const char* step, const GraphDims& dims, Call&& call) {
  check(call_guarded(graph, step, dims, call), graph, step, dims);
}

// The graphs with their tensors and SDPA node, not yet validated. sm_version > 0 fixes the target
// architecture (then validate() needs no device); 0 reads it from the current device when validating.
GraphPtr forward_graph(const GraphDims& dims, int sm_version);
GraphPtr backward_graph(const GraphDims& dims, int sm_version);

// validate, build_operation_graph, create_execution_plans (heuristics A, then fallback), check_support,
// build_plans: each step through check().
void build(fe::graph::Graph& graph, cudnnHandle_t handle, const char* name, const GraphDims& dims);

}  // namespace shardft::cuda::sdpa_detail
