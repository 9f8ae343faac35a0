#pragma once
// Causal grouped-query attention over packed segments on bf16 q, k, v: the GPU's fused flash kernels
// (cuDNN's SDPA, kernels/cuda/cudnn_attention), behind an interface the model calls without #if. Same
// math as kernels/attention_lse.hpp with segments for seq_ids:
//   a segment is a run of tokens that attend among themselves causally (a packed sample, or a row);
//   q, o, dout, dq [tokens, H*hd]; k, v, dk, dv [tokens, G*hd]; all bf16, row-major, token-major;
//   o_i = sum_{j <= i in i's segment} softmax_j(q_i . k_j * scale) v_j,  scale = 1 / sqrt(hd)
// Outputs are rounded to bf16 once; softmax and accumulation run in fp32 inside the kernels. `stats` is
// what forward keeps for backward (the softmax's log-sum-exp per query and head, in the library's
// layout: fused_attention_stats_size floats).
//
// Builds without the library (the CPU build, a GPU build without cuDNN) report fused_attention_built()
// false and throw if called; the model then runs kernels/attention_lse.hpp's kernels.
#include <cstdint>
#include <string>

#include "kernels/attention.hpp"
#include "kernels/bf16.hpp"
#include "kernels/types.hpp"

namespace shardft {

// The segments of one call: starts [count + 1] on the device, each segment's first token, then the
// token count; max_length their longest. version names the starts' contents (a new value whenever a
// buffer is filled with other segments; 0: unknown), so tables derived from them are made once per batch.
struct AttentionSegments {
  Unmanaged1<const std::int32_t> starts;
  int count = 0, max_length = 0;
  std::uint64_t version = 0;
};

// True where this build has the fused kernels and a device to run them.
bool fused_attention_built();
// True where this build has the fused kernels, device or not (the start-up's build line).
bool fused_attention_compiled();
// "cuDNN 9.19.0 SDPA (cudnn-frontend 1.23.0)", or why there are none ("not built with cuDNN").
std::string fused_attention_backend();
// Forward and backward on small packed GQA problems against kernels/attention_lse.hpp's reference
// kernel in fp32 on the same bf16 inputs: "" when they agree within bf16 rounding (relative norm
// 2e-2), else what disagreed or failed. Run once at start-up before a run picks the fused kernels.
// deterministic_backward: false tests cuDNN's atomic backward (AttentionShape::deterministic_backward).
std::string fused_attention_self_test(bool deterministic_backward = true);
// The same with q, k, v and their gradients as column blocks of one array each (the model's stacked
// q/k/v projection): where it fails, the model hands the fused kernels dense copies instead.
std::string fused_attention_column_blocks_self_test();

std::int64_t fused_attention_stats_size(const AttentionShape& s, const AttentionSegments& seg);
// Makes the tables the calls on one batch's segments share (cuDNN's ragged offsets: one small kernel)
// now, before the layers, instead of in the first layer's call: column_blocks names the layout those calls
// will pass (q, k, v as column blocks of the stacked projection's output, or each dense). A call with the
// other layout remakes them (the same results, one launch more).
void fused_attention_prepare(const AttentionShape& s, const AttentionSegments& seg, bool column_blocks);
// q, k, v (and backward's dq, dk, dv) may be column blocks of one wider array (Strided2: the [q | k | v]
// output of one projection GEMM): each dense, or all with one row stride (k and v then share theirs, and
// each gradient has its input's layout). Rows contiguous; o and dout dense. Anything else throws
// std::invalid_argument.
void fused_attention_forward(const AttentionShape& s, const AttentionSegments& seg, Strided2<const bf16> q,
                             Strided2<const bf16> k, Strided2<const bf16> v, Unmanaged2<bf16> o,
                             Unmanaged1<float> stats);
// Overwrites dq, dk, dv.
void fused_attention_backward(const AttentionShape& s, const AttentionSegments& seg, Strided2<const bf16> q,
                              Strided2<const bf16> k, Strided2<const bf16> v, Unmanaged2<const bf16> o,
                              Unmanaged2<const bf16> dout, Unmanaged1<const float> stats, Strided2<bf16> dq,
                              Strided2<bf16> dk, Strided2<bf16> dv);

}  // namespace shardft
