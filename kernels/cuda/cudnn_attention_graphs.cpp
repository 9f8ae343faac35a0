// The cudnn-frontend graphs behind kernels/cuda/cudnn_attention.hpp. Every choice below follows what the
// frontend (1.23) validates and what cuDNN's own ragged SDPA tests build: THD tensors with int64 element
// offsets, the padding mask fed with per-segment lengths (the frontend refuses ragged offsets without
// it), causal as the top-left diagonal band with right bound 0, token-major ragged stats.
#include "kernels/cuda/cudnn_attention_graphs.hpp"

#include <cstring>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace shardft::cuda::sdpa_detail {

namespace {

using Tensor = std::shared_ptr<fe::graph::Tensor_attributes>;

std::int64_t round_up(std::int64_t x, std::int64_t to) { return (x + to - 1) / to * to; }

const char* code_name(fe::error_code_t code) {
  switch (code) {
    case fe::error_code_t::OK: return "OK";
    case fe::error_code_t::ATTRIBUTE_NOT_SET: return "ATTRIBUTE_NOT_SET";
    case fe::error_code_t::SHAPE_DEDUCTION_FAILED: return "SHAPE_DEDUCTION_FAILED";
    case fe::error_code_t::INVALID_TENSOR_NAME: return "INVALID_TENSOR_NAME";
    case fe::error_code_t::INVALID_VARIANT_PACK: return "INVALID_VARIANT_PACK";
    case fe::error_code_t::GRAPH_NOT_SUPPORTED: return "GRAPH_NOT_SUPPORTED";
    case fe::error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED: return "GRAPH_EXECUTION_PLAN_CREATION_FAILED";
    case fe::error_code_t::GRAPH_EXECUTION_FAILED: return "GRAPH_EXECUTION_FAILED";
    case fe::error_code_t::HEURISTIC_QUERY_FAILED: return "HEURISTIC_QUERY_FAILED";
    case fe::error_code_t::UNSUPPORTED_GRAPH_FORMAT: return "UNSUPPORTED_GRAPH_FORMAT";
    case fe::error_code_t::CUDA_API_FAILED: return "CUDA_API_FAILED";
    case fe::error_code_t::CUDNN_BACKEND_API_FAILED: return "CUDNN_BACKEND_API_FAILED";
    case fe::error_code_t::INVALID_CUDA_DEVICE: return "INVALID_CUDA_DEVICE";
    case fe::error_code_t::HANDLE_ERROR: return "HANDLE_ERROR";
    case fe::error_code_t::INVALID_VALUE: return "INVALID_VALUE";
    case fe::error_code_t::NVRTC_COMPILATION_FAILED: return "NVRTC_COMPILATION_FAILED";
  }
  return "unknown error code";
}

GraphPtr new_graph(int sm_version) {
  auto graph = std::make_shared<fe::graph::Graph>();
  // bf16 tensors, fp32 softmax and accumulation: what the numerics of DESIGN.md ask of attention.
  graph->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  // Before any node is added: each node copies the graph's context (and so the target) when created.
  if (sm_version > 0) graph->set_sm_version(sm_version);
  return graph;
}

// [b+1, 1, 1, 1] int64: element offset of each segment's first token (last entry: the total).
Tensor offsets(fe::graph::Graph& graph, const char* name, Uid uid, std::int64_t b) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim({b + 1, 1, 1, 1})
                          .set_stride({1, 1, 1, 1})
                          .set_data_type(fe::DataType_t::INT64));
}

// [b, 1, 1, 1] int32: each segment's length, as the padding mask reads it.
Tensor lengths(fe::graph::Graph& graph, const char* name, Uid uid, std::int64_t b) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim({b, 1, 1, 1})
                          .set_stride({1, 1, 1, 1})
                          .set_data_type(fe::DataType_t::INT32));
}

// A token-major bf16 tensor of `heads` heads whose tokens are `row` elements apart (heads * d when dense)
// seen as ragged [b, heads, s, d]: head stride d, token stride row; the batch stride is superseded by the
// ragged offsets (given the packed value).
void describe_thd(fe::graph::Tensor_attributes& t, const GraphDims& dims, std::int64_t heads, std::int64_t row,
                  Uid uid, const Tensor& ragged) {
  t.set_uid(uid)
      .set_dim({dims.b, heads, dims.s, dims.d})
      .set_stride({dims.s * row, dims.d, row, 1})
      .set_ragged_offset(ragged);
}

Tensor thd_input(fe::graph::Graph& graph, const char* name, const GraphDims& dims, std::int64_t heads,
                 std::int64_t row, Uid uid, const Tensor& ragged) {
  fe::graph::Tensor_attributes t;
  t.set_name(name);
  describe_thd(t, dims, heads, row, uid, ragged);
  return graph.tensor(t);
}

// Stats [tokens, heads] fp32 token-major, seen as ragged [b, heads, s, 1].
void describe_stats(fe::graph::Tensor_attributes& t, const GraphDims& dims, const Tensor& ragged) {
  t.set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({dims.b, dims.h, dims.s, 1})
      .set_stride({dims.s * dims.h, 1, dims.h, 1})
      .set_ragged_offset(ragged);
}

}  // namespace

bool GraphDims::operator==(const GraphDims& o) const {
  // The scale by its bits: the key must tell apart any two values the graph would bake in.
  return b == o.b && s == o.s && h == o.h && g == o.g && d == o.d && max_total == o.max_total &&
         q_row == o.q_row && kv_row == o.kv_row &&
         std::memcmp(&scale, &o.scale, sizeof scale) == 0 && deterministic == o.deterministic;
}

std::string GraphDims::describe() const {
  std::ostringstream os;
  os << "B=" << b << " S=" << s << " H=" << h << " G=" << g << " d=" << d << " T<=" << max_total << " scale=" << scale
     << (deterministic ? " deterministic" : " non-deterministic");
  if (q_row != h * d || kv_row != g * d) os << " q_row=" << q_row << " kv_row=" << kv_row;
  return os.str();
}

GraphDims graph_dims(const SdpaShape& shape) {
  GraphDims dims;
  dims.b = shape.segments;
  dims.s = round_up(shape.max_segment, 64);
  dims.h = shape.heads;
  dims.g = shape.kv_heads;
  dims.d = shape.head_dim;
  dims.max_total = round_up(shape.tokens, 64);
  dims.q_row = shape.q_row();
  dims.kv_row = shape.kv_row();
  dims.scale = shape.scale;
  dims.deterministic = shape.deterministic;
  return dims;
}

void check(fe::error_t status, const char* graph, const char* step, const GraphDims& dims) {
  if (status.is_good()) return;
  throw std::runtime_error(std::string("cuDNN SDPA ") + graph + " " + step + " (" + dims.describe() +
                           "): " + code_name(status.get_code()) + ": " + status.get_message());
}

namespace {

GraphPtr make_forward(const GraphDims& dims, int sm_version) {
  GraphPtr graph = new_graph(sm_version);
  auto q = thd_input(*graph, "Q", dims, dims.h, dims.q_row, kQ, offsets(*graph, "Q_offsets", kQOffsets, dims.b));
  auto k = thd_input(*graph, "K", dims, dims.g, dims.kv_row, kK, offsets(*graph, "K_offsets", kKOffsets, dims.b));
  auto v = thd_input(*graph, "V", dims, dims.g, dims.kv_row, kV, offsets(*graph, "V_offsets", kVOffsets, dims.b));
  auto options = fe::graph::SDPA_attributes()
                     .set_name("shardft_sdpa_forward")
                     .set_generate_stats(true)
                     .set_attn_scale(dims.scale)
                     .set_padding_mask(true)
                     .set_seq_len_q(lengths(*graph, "seq_len_q", kSeqLenQ, dims.b))
                     .set_seq_len_kv(lengths(*graph, "seq_len_kv", kSeqLenKV, dims.b))
                     .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                     .set_diagonal_band_right_bound(0)
                     // Pinned rather than AUTO: the composite node is the one whose ragged + padding +
                     // causal + GQA support this file was written against, whatever cuDNN is loaded.
                     .set_implementation(fe::AttentionImplementation_t::COMPOSITE);
  auto [o, stats] = graph->sdpa(q, k, v, options);
  o->set_output(true);
  describe_thd(*o, dims, dims.h, dims.h * dims.d, kO, offsets(*graph, "O_offsets", kOOffsets, dims.b));
  stats->set_output(true);
  describe_stats(*stats, dims, offsets(*graph, "Stats_offsets", kStatsOffsets, dims.b));
  return graph;
}

GraphPtr make_backward(const GraphDims& dims, int sm_version) {
  GraphPtr graph = new_graph(sm_version);
  auto q_off = offsets(*graph, "Q_offsets", kQOffsets, dims.b);
  auto k_off = offsets(*graph, "K_offsets", kKOffsets, dims.b);
  auto v_off = offsets(*graph, "V_offsets", kVOffsets, dims.b);
  auto o_off = offsets(*graph, "O_offsets", kOOffsets, dims.b);
  auto q = thd_input(*graph, "Q", dims, dims.h, dims.q_row, kQ, q_off);
  auto k = thd_input(*graph, "K", dims, dims.g, dims.kv_row, kK, k_off);
  auto v = thd_input(*graph, "V", dims, dims.g, dims.kv_row, kV, v_off);
  auto o = thd_input(*graph, "O", dims, dims.h, dims.h * dims.d, kO, o_off);
  auto d_o = thd_input(*graph, "dO", dims, dims.h, dims.h * dims.d, kDO, o_off);
  fe::graph::Tensor_attributes stats_attributes;
  stats_attributes.set_name("Stats");
  describe_stats(stats_attributes, dims, offsets(*graph, "Stats_offsets", kStatsOffsets, dims.b));
  auto stats = graph->tensor(stats_attributes);
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("shardft_sdpa_backward")
                     .set_attn_scale(dims.scale)
                     .set_padding_mask(true)
                     .set_seq_len_q(lengths(*graph, "seq_len_q", kSeqLenQ, dims.b))
                     .set_seq_len_kv(lengths(*graph, "seq_len_kv", kSeqLenKV, dims.b))
                     .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                     .set_diagonal_band_right_bound(0)
                     // Size the token-packed fp32 scratch (dQ accumulator, GQA's per-query-head dK/dV,
                     // softmax row sums) by tokens rather than segments * S.
                     .set_max_total_seq_len_q(dims.max_total)
                     .set_max_total_seq_len_kv(dims.max_total)
                     .set_deterministic_algorithm(dims.deterministic);
  auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, d_o, stats, options);
  dq->set_output(true);
  describe_thd(*dq, dims, dims.h, dims.q_row, kDQ, q_off);
  dk->set_output(true);
  describe_thd(*dk, dims, dims.g, dims.kv_row, kDK, k_off);
  dv->set_output(true);
  describe_thd(*dv, dims, dims.g, dims.kv_row, kDV, v_off);
  return graph;
}

// The frontend reports most problems through error_t, but some graph-construction calls throw.
template <class Make>
GraphPtr guarded(Make make, const char* name, const GraphDims& dims, int sm_version) {
  try {
    return make(dims, sm_version);
  } catch (const std::exception& e) {
    rethrow(name, "graph construction", dims, e);
  }
}

}  // namespace

void rethrow(const char* graph, const char* step, const GraphDims& dims, const std::exception& e) {
  throw std::runtime_error(std::string("cuDNN SDPA ") + graph + " " + step + " (" + dims.describe() + ") threw: " +
                           e.what());
}

GraphPtr forward_graph(const GraphDims& dims, int sm_version) {
  return guarded(make_forward, "forward", dims, sm_version);
}

GraphPtr backward_graph(const GraphDims& dims, int sm_version) {
  return guarded(make_backward, "backward", dims, sm_version);
}

void build(fe::graph::Graph& graph, cudnnHandle_t handle, const char* name, const GraphDims& dims) {
  run_step(name, "validate", dims, [&] { return graph.validate(); });
  run_step(name, "build_operation_graph", dims, [&] { return graph.build_operation_graph(handle); });
  run_step(name, "create_execution_plans", dims,
           [&] { return graph.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}); });
  run_step(name, "check_support", dims, [&] { return graph.check_support(); });
  run_step(name, "build_plans", dims,
           [&] { return graph.build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE); });
}

}  // namespace shardft::cuda::sdpa_detail
