// cuDNN fused attention: shape checks, the process-wide handle, graph cache and workspace, and the
// calls (contract in cudnn_attention.hpp; the graphs themselves in cudnn_attention_graphs.cpp).
#include "kernels/cuda/cudnn_attention.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <list>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "kernels/cuda/cublas_gemm.hpp"
#include "kernels/cuda/cudnn_attention_graphs.hpp"

namespace shardft::cuda {

namespace {

using namespace sdpa_detail;

// Bounded so that a run whose packed shapes keep changing cannot grow host memory without limit.
constexpr std::size_t kCacheEntries = 64;
// Hopper's fused SDPA is the architecture validated without a device (sdpa_validate_graphs).
constexpr int kValidateSmVersion = 90;

struct Entry {
  GraphDims dims;
  GraphPtr forward, backward;
  std::int64_t forward_workspace = 0, backward_workspace = 0;
};

struct State {
  std::mutex mutex;
  cudnnHandle_t handle = nullptr;
  std::list<Entry> cache;  // most recently used first
  std::int64_t builds = 0;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

// Never destroyed, as cublas_gemm's state: a handle torn down by a static destructor after the CUDA
// runtime has unloaded crashes at exit, and the driver reclaims everything when the process ends.
State& state() {
  static State* s = new State;
  return *s;
}

void check_cudnn(cudnnStatus_t status, const std::string& what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  throw std::runtime_error("cuDNN " + what + ": " + cudnnGetErrorString(status));
}

std::string describe(const SdpaShape& s) {
  std::ostringstream os;
  os << "tokens=" << s.tokens << " segments=" << s.segments << " max_segment=" << s.max_segment
     << " heads=" << s.heads << " kv_heads=" << s.kv_heads << " head_dim=" << s.head_dim << " scale=" << s.scale;
  if (s.q_stride > 0 || s.kv_stride > 0) os << " q_stride=" << s.q_row() << " kv_stride=" << s.kv_row();
  return os.str();
}

// The problems cuDNN would report obscurely (or not at all), named in the caller's terms.
void validate_shape(const SdpaShape& s) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("cuDNN SDPA shape (" + describe(s) + "): " + why);
  };
  if (s.segments < 1) fail("segments must be at least 1");
  if (s.max_segment < 1) fail("max_segment must be at least 1");
  if (s.max_segment > std::numeric_limits<std::int32_t>::max() - 64) fail("max_segment is out of int32 range");
  if (s.tokens < s.segments) fail("tokens < segments: every segment needs at least one token");
  if (s.tokens > static_cast<std::int64_t>(s.segments) * s.max_segment)
    fail("tokens > segments * max_segment: some segment would be longer than max_segment");
  if (s.heads < 1 || s.kv_heads < 1) fail("heads and kv_heads must be at least 1");
  if (s.heads % s.kv_heads != 0)
    fail("heads (" + std::to_string(s.heads) + ") is not a multiple of kv_heads (" + std::to_string(s.kv_heads) +
         "): grouped-query attention shares each kv head among the same number of query heads");
  if (s.head_dim < 8 || s.head_dim % 8 != 0)
    fail("head_dim " + std::to_string(s.head_dim) +
         " is not a positive multiple of 8, which cuDNN's fused attention needs (16-byte rows)");
  if (!(s.scale > 0.f) || !std::isfinite(s.scale)) fail("scale must be positive and finite");
  if (s.q_stride < 0 || s.kv_stride < 0) fail("row strides must not be negative");
  if (s.q_row() < static_cast<std::int64_t>(s.heads) * s.head_dim ||
      s.kv_row() < static_cast<std::int64_t>(s.kv_heads) * s.head_dim)
    fail("a row stride is narrower than its rows");
  if (s.q_row() % 8 != 0 || s.kv_row() % 8 != 0) fail("row strides must be multiples of 8 elements (16-byte rows)");
}

// cuDNN's tensors are declared 16-byte aligned (the frontend's default); the tables need their own type's.
void check_pointer(const void* p, std::size_t alignment, const char* call, const char* name) {
  if (p == nullptr) throw std::invalid_argument(std::string(call) + ": " + name + " is null");
  if (reinterpret_cast<std::uintptr_t>(p) % alignment != 0)
    throw std::invalid_argument(std::string(call) + ": " + name + " is not " + std::to_string(alignment) +
                                "-byte aligned");
}

void check_segments(const SdpaSegments& seg, const char* call) {
  check_pointer(seg.lengths, alignof(std::int32_t), call, "segments.lengths");
  check_pointer(seg.q_offsets, alignof(std::int64_t), call, "segments.q_offsets");
  check_pointer(seg.kv_offsets, alignof(std::int64_t), call, "segments.kv_offsets");
  check_pointer(seg.o_offsets, alignof(std::int64_t), call, "segments.o_offsets");
  check_pointer(seg.stats_offsets, alignof(std::int64_t), call, "segments.stats_offsets");
}

cudnnHandle_t handle_of(State& s) {
  if (s.handle) return s.handle;
  if (device_count() == 0) throw std::runtime_error("cuDNN: no CUDA device in this process");
  check_cudnn(cudnnCreate(&s.handle), "cudnnCreate");
  return s.handle;
}

std::int64_t workspace_size(fe::graph::Graph& graph, const char* name, const GraphDims& dims) {
  std::int64_t bytes = 0;
  run_step(name, "get_workspace_size", dims, [&] { return graph.get_workspace_size(bytes); });
  return bytes;
}

Entry build_entry(cudnnHandle_t handle, const GraphDims& dims) {
  Entry e;
  e.dims = dims;
  e.forward = forward_graph(dims, 0);  // 0: the target is the current device
  build(*e.forward, handle, "forward", dims);
  e.backward = backward_graph(dims, 0);
  build(*e.backward, handle, "backward", dims);
  e.forward_workspace = workspace_size(*e.forward, "forward", dims);
  e.backward_workspace = workspace_size(*e.backward, "backward", dims);
  return e;
}

// The cached graphs of these dimensions, built (both directions at once) on first use.
Entry& entry_for(State& s, const GraphDims& dims) {
  for (auto it = s.cache.begin(); it != s.cache.end(); ++it) {
    if (it->dims == dims) {
      s.cache.splice(s.cache.begin(), s.cache, it);
      return s.cache.front();
    }
  }
  Entry e = build_entry(handle_of(s), dims);  // throws before anything is cached
  s.cache.push_front(std::move(e));
  ++s.builds;
  if (s.cache.size() > kCacheEntries) s.cache.pop_back();
  return s.cache.front();
}

// One buffer for every plan of the process, grown (rarely: the first steps) to the largest need.
void* workspace_for(State& s, std::int64_t bytes, const GraphDims& dims) {
  if (bytes <= 0) return nullptr;
  const auto need = static_cast<std::size_t>(bytes);
  if (need <= s.workspace_bytes) return s.workspace;
  if (s.workspace) {
    // Work queued earlier on any stream may still use the old buffer.
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before growing the cuDNN SDPA workspace)");
    check_cuda(cudaFree(s.workspace), "cudaFree (cuDNN SDPA workspace)");
    s.workspace = nullptr;
    s.workspace_bytes = 0;
  }
  const cudaError_t status = cudaMalloc(&s.workspace, need);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    s.workspace = nullptr;
    throw std::runtime_error("CUDA cudaMalloc of the cuDNN SDPA workspace (" + std::to_string(need) + " bytes for " +
                             dims.describe() + "): " + cudaGetErrorName(status) +
                             (dims.deterministic ? " (the deterministic backward's workspace grows with "
                                                   "segments * heads * S^2; see cudnn_attention.hpp)"
                                                 : ""));
  }
  s.workspace_bytes = need;
  return s.workspace;
}

using VariantPack = std::unordered_map<std::int64_t, void*>;

// Both graphs read the segment tables under the same UIDs; k and v (and each gradient and its input)
// share their offsets.
VariantPack segment_pack(const SdpaSegments& seg) {
  auto p = [](const void* x) { return const_cast<void*>(x); };  // cuDNN's variant pack is void*
  return {{kSeqLenQ, p(seg.lengths)},     {kSeqLenKV, p(seg.lengths)},    {kQOffsets, p(seg.q_offsets)},
          {kOOffsets, p(seg.o_offsets)},  {kKOffsets, p(seg.kv_offsets)}, {kVOffsets, p(seg.kv_offsets)},
          {kStatsOffsets, p(seg.stats_offsets)}};
}

// Runs one direction's graph on `stream` with the shared workspace (the caller holds the mutex).
void execute(State& s, const SdpaShape& shape, bool backward, VariantPack& pack, cudaStream_t stream) {
  const GraphDims dims = graph_dims(shape);
  Entry& e = entry_for(s, dims);
  void* workspace = workspace_for(s, backward ? e.backward_workspace : e.forward_workspace, dims);
  check_cudnn(cudnnSetStream(s.handle, stream), "cudnnSetStream");
  fe::graph::Graph& graph = backward ? *e.backward : *e.forward;
  run_step(backward ? "backward" : "forward", "execute", dims,
           [&] { return graph.execute(s.handle, pack, workspace); });
}

}  // namespace

SdpaSegmentTables sdpa_segment_tables(const SdpaShape& shape, const std::vector<std::int32_t>& lengths) {
  validate_shape(shape);
  if (lengths.size() != static_cast<std::size_t>(shape.segments))
    throw std::invalid_argument("sdpa_segment_tables: " + std::to_string(lengths.size()) + " lengths for " +
                                std::to_string(shape.segments) + " segments");
  SdpaSegmentTables t;
  t.lengths = lengths;
  std::int64_t start = 0;
  for (std::size_t b = 0; b <= lengths.size(); ++b) {
    t.q_offsets.push_back(start * shape.q_row());
    t.kv_offsets.push_back(start * shape.kv_row());
    t.o_offsets.push_back(start * shape.heads * shape.head_dim);
    t.stats_offsets.push_back(start * shape.heads);
    if (b == lengths.size()) break;
    if (lengths[b] < 1 || lengths[b] > shape.max_segment)
      throw std::invalid_argument("sdpa_segment_tables: segment " + std::to_string(b) + " has length " +
                                  std::to_string(lengths[b]) + ", outside 1.." + std::to_string(shape.max_segment));
    start += lengths[b];
  }
  if (start != shape.tokens)
    throw std::invalid_argument("sdpa_segment_tables: the lengths add up to " + std::to_string(start) +
                                " tokens, the shape says " + std::to_string(shape.tokens));
  return t;
}

std::int64_t sdpa_stats_elements(const SdpaShape& shape) {
  validate_shape(shape);
  return shape.tokens * shape.heads;
}

void sdpa_forward(const SdpaShape& shape, const SdpaSegments& segments, const std::uint16_t* q, const std::uint16_t* k,
                  const std::uint16_t* v, std::uint16_t* o, float* stats, cudaStream_t stream) {
  constexpr const char* call = "sdpa_forward";
  validate_shape(shape);
  check_segments(segments, call);
  for (auto [name, p] : {std::pair<const char*, const void*>{"q", q}, {"k", k}, {"v", v}, {"o", o}, {"stats", stats}})
    check_pointer(p, 16, call, name);
  VariantPack pack = segment_pack(segments);
  auto p = [](const void* x) { return const_cast<void*>(x); };
  pack.insert({{kQ, p(q)}, {kK, p(k)}, {kV, p(v)}, {kO, o}, {kStats, stats}});
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  execute(s, shape, false, pack, stream);
}

void sdpa_backward(const SdpaShape& shape, const SdpaSegments& segments, const std::uint16_t* q,
                   const std::uint16_t* k, const std::uint16_t* v, const std::uint16_t* o, const std::uint16_t* d_o,
                   const float* stats, std::uint16_t* dq, std::uint16_t* dk, std::uint16_t* dv, cudaStream_t stream) {
  constexpr const char* call = "sdpa_backward";
  validate_shape(shape);
  check_segments(segments, call);
  for (auto [name, p] : {std::pair<const char*, const void*>{"q", q}, {"k", k}, {"v", v}, {"o", o}, {"d_o", d_o},
                         {"stats", stats}, {"dq", dq}, {"dk", dk}, {"dv", dv}})
    check_pointer(p, 16, call, name);
  VariantPack pack = segment_pack(segments);
  auto p = [](const void* x) { return const_cast<void*>(x); };
  pack.insert({{kQ, p(q)}, {kK, p(k)}, {kV, p(v)}, {kO, p(o)}, {kDO, p(d_o)}, {kStats, p(stats)}, {kDQ, dq},
               {kDK, dk}, {kDV, dv}});
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  execute(s, shape, true, pack, stream);
}

std::string cudnn_version_string() {
  const std::size_t v = cudnnGetVersion();
  // cuDNN 9 encodes major * 10000 + minor * 100 + patch; cuDNN 8 used major * 1000 + minor * 100 + patch.
  const std::size_t major = v >= 90000 ? v / 10000 : v / 1000;
  const std::size_t minor = v >= 90000 ? v % 10000 / 100 : v % 1000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
}

void sdpa_validate_graphs(const SdpaShape& shape) {
  validate_shape(shape);
  const GraphDims dims = graph_dims(shape);
  // cuDNN 9.8 and later finalize an operation graph without a handle (it is needed from the heuristics
  // query on), so the backend's own checks of every tensor and operation run here too.
  const bool lower = cudnnGetVersion() >= 90800;
  GraphPtr forward = forward_graph(dims, kValidateSmVersion);
  run_step("forward", "validate", dims, [&] { return forward->validate(); });
  if (lower)
    run_step("forward", "build_operation_graph", dims, [&] { return forward->build_operation_graph(nullptr); });
  GraphPtr backward = backward_graph(dims, kValidateSmVersion);
  run_step("backward", "validate", dims, [&] { return backward->validate(); });
  if (lower)
    run_step("backward", "build_operation_graph", dims, [&] { return backward->build_operation_graph(nullptr); });
}

SdpaCacheStats sdpa_cache_stats() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return {static_cast<int>(s.cache.size()), s.builds, s.workspace_bytes};
}

}  // namespace shardft::cuda
