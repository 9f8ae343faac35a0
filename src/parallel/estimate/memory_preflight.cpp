#include "parallel/estimate/memory_preflight.hpp"

#include <algorithm>
#include <sstream>
#include <vector>

#include "config/memory_size.hpp"
#include "kernels/attention_fused.hpp"
#include "kernels/gemm.hpp"
#include "kernels/memory_capacity.hpp"
#include "kernels/types.hpp"
#include "parallel/flat_partition.hpp"
#include "parallel/zero/nf4_weights.hpp"

namespace shardft {

std::string RankMemoryEstimate::describe() const {
  std::ostringstream s;
  s << "weights " << format_bytes(weights);
  if (frozen_weights > 0) s << " (" << format_bytes(frozen_weights) << " frozen)";
  s << " + gradients " << format_bytes(grads) << " + optimizer "
    << format_bytes(optimizer) << " + gathered " << format_bytes(gathered) << " + activations "
    << format_bytes(activations) << " = " << format_bytes(total());
  return s.str();
}

namespace {

// bf16 compute through fp32 kernels, on a build without the fused ones (the CPU): eager attention's
// widened q, k, v and fp32 gradients of q, k, v and o, or memory-efficient attention's seven fp32
// [seq, head_dim] blocks of one sequence's head (backward's q, dO, dq, k, v, dk, dv); the per-query
// deltas; the GEMMs' widened operand tiles and fp32 output tile (the largest operands: gate/up's
// [tokens, 2I] and the down projection's [tokens, I]).
double unfused_bf16_scratch(const ModelConfig& m, const ActivationShape& a) {
  if (!a.bf16) return 0;
  const double tokens = static_cast<double>(a.batch) * a.seq, hd = m.head_dim(), I = m.intermediate_size;
  const double qd = m.num_attention_heads * hd, kvd = m.num_key_value_heads * hd;
  double bytes = 0;
  // As infer/attention_choice.cpp chooses (a failed self-test there makes this an underestimate).
  if (!(a.fused_attention_allowed && fused_attention_built())) {
    const double fp32_copies = a.eager_attention ? tokens * ((qd + 2 * kvd) + (2 * qd + 2 * kvd))
                                                 : 7 * static_cast<double>(a.seq) * hd;
    bytes += 4 * (fp32_copies + tokens * m.num_attention_heads);
  }
  if (gemm_widens_bf16()) {  // the GEMMs widen their bf16 operands a tile at a time
    const double tile = static_cast<double>(gemm_bf16_tile_elements());
    bytes += 4 * (2 * std::min(tile, tokens * 2 * I) + std::min(tile, tokens * I));
  }
  return bytes;
}

// Bytes one micro-batch keeps for backward, and the working set of the layer being computed. Per layer
// and token, forward keeps the layer input and the post-attention residual (d each), the two norms'
// outputs (2d), q, k, v, the attention output (q_dim), gate/up (2I), one 1 / rms per token of each norm
// and the attention's per-query statistics (eager: the [seq] row of probabilities per head;
// memory-efficient: one log-sum-exp per head). In fp32 every tensor is fp32 and the SwiGLU product (I)
// is kept too; in bf16 the tensors are bf16 and the product is recomputed in backward. With
// checkpointing only the layer input stays; one layer's set exists at a time while it is recomputed.
// Backward adds about one layer's set again: the gradients of those activations (in bf16, the buffers
// it holds counted one by one).
double activation_estimate(const ModelConfig& m, const ActivationShape& a) {
  const double tokens = static_cast<double>(a.batch) * a.seq, d = m.hidden_size, hd = m.head_dim();
  const double qd = m.num_attention_heads * hd, kvd = m.num_key_value_heads * hd, I = m.intermediate_size;
  const double stats = a.eager_attention ? static_cast<double>(m.num_attention_heads) * a.seq : m.num_attention_heads;
  const double tensors = 4 * d + 2 * qd + 2 * kvd + 2 * I;
  const double layer = a.bf16 ? tokens * (2 * tensors + 4 * (stats + 2)) : tokens * 4 * (tensors + I + stats + 2);
  const double c = a.bf16 ? 2 : 4;  // bytes of the compute dtype
  const double kept = a.checkpointing ? tokens * c * d * m.num_hidden_layers + layer : layer * m.num_hidden_layers;
  // bf16: the residual stream's gradient (fp32 dh and dx, its bf16 copy), gate/up's bf16 dy, SwiGLU's
  // recomputed product and its gradient (one buffer), the fp32 staging of a GEMM input ([tokens, I] at
  // most) and of a layer input, the attention's bf16 dq, dk, dv and d o.
  const double bf16_backward = tokens * (4 * 2 * d + 2 * d + 2 * 2 * I + 2 * I + 4 * I + 4 * d + 2 * (2 * qd + 2 * kvd));
  const double backward = a.bf16 ? bf16_backward : layer;
  const double chunk = a.logits_chunk_tokens > 0 ? std::min<double>(a.logits_chunk_tokens, tokens) : tokens;
  // the final norm's fp32 input and its output (in bf16 compute written in bf16), the logits chunk
  const double head = tokens * (4 * d + c * d + 4) + c * chunk * m.vocab_size;
  return kept + backward + head + unfused_bf16_scratch(m, a);
}

}  // namespace

RankMemoryEstimate estimate_rank_memory(const ModelConfig& model, const ParamLayout& layout, const ZeroConfig& zero,
                                        int shard_size, const ActivationShape& shape) {
  // The ZeroEngine constructors' allocations (parallel/zero_engine.cpp), element for element. With LoRA
  // the trainable factors and the frozen base are two partitions of the same blocks (two engines): the
  // trainable one is allocated as any model; the frozen one holds compute weights only (no gradients,
  // no master weights, no optimizer state).
  // Stage 0 pads its units as the sharded stages do (to a multiple of N * kAlign), though it owns them whole.
  const int shards = shard_size;
  const bool lora = layout.has_frozen();
  const FlatPartition part(layout, shards, lora ? ParamSet::trainable : ParamSet::all);
  const double full = static_cast<double>(part.full_numel()), shard = static_cast<double>(part.shard_numel());
  const double owned = zero.stage == 0 ? full : shard;
  const bool bf16_weights = zero.dtype == ComputeDtype::bf16 && !zero.quantized_weights;
  const double weight_bytes = bf16_weights ? 2 : 4;
  RankMemoryEstimate e;
  e.optimizer = 3 * 4 * owned;  // master, exp_avg, exp_avg_sq
  if (zero.stage == 0 && zero.dtype == ComputeDtype::fp32) {
    e.weights = 0;  // the master weights are the compute weights
  } else {
    e.weights = weight_bytes * (zero.stage < 3 ? full : shard);
  }
  e.grads = (zero.stage <= 1 ? 4 * full : 0) + (zero.stage == 0 ? 0 : 4 * owned);
  // Per block, the elements gathered to compute it (both partitions' units: unit u is block u's in each)
  // and the trainable elements whose gradient is held whole until its reduce-scatter.
  std::vector<double> block_weights, block_grads;
  for (const FlatUnit& u : part.units()) {
    block_weights.push_back(static_cast<double>(u.padded));
    block_grads.push_back(static_cast<double>(u.padded));
  }
  if (lora) {
    const FlatPartition frozen(layout, shards, ParamSet::frozen);
    e.frozen_weights = weight_bytes * static_cast<double>(zero.stage < 3 ? frozen.full_numel() : frozen.shard_numel());
    for (const ParamSpec& p : layout.params()) {  // QLoRA's NF4 matrices: whole, or their bytes sharded at stage 3
      if (p.nf4) e.frozen_weights += static_cast<double>(nf4_held_bytes(p.numel(), zero.stage == 3 ? shards : 1));
    }
    e.weights += e.frozen_weights;
    block_weights.resize(std::max(block_weights.size(), frozen.units().size()), 0.0);
    for (std::size_t u = 0; u < frozen.units().size(); ++u) block_weights[u] += static_cast<double>(frozen.units()[u].padded);
  }
  const double largest_weights = block_weights.empty() ? 0 : *std::max_element(block_weights.begin(), block_weights.end());
  const double largest_grads = block_grads.empty() ? 0 : *std::max_element(block_grads.begin(), block_grads.end());
  // Stage 3 gathers the block it computes and prefetches the next; stages 1-3 hold a unit's gradient
  // whole until its reduce-scatter. (qwZ gathers dequantize into fp32.)
  if (zero.stage == 3) e.gathered = 2 * weight_bytes * largest_weights;
  // (And the fp32 receive buffer of a unit's reduce-scattered shard.)
  if (zero.stage >= 1) e.gathered += 4 * largest_grads * (1.0 + 1.0 / shards);
  // QLoRA: the block computing's NF4 matrices dequantized (every stage) and, at stage 3, its gathered
  // NF4 bytes and the prefetched block's.
  if (lora) {
    e.nf4_transient = static_cast<double>(nf4_peak_transient_bytes(layout, zero.dtype, zero.stage == 3 ? shards : 0));
    e.gathered += e.nf4_transient;
  }
  e.activations = activation_estimate(model, shape);
  return e;
}

RankMemoryBudget rank_memory_budget(const std::string& max_memory_per_rank, int ranks_sharing_host) {
  const double limit = memory_limit_bytes(max_memory_per_rank);
  if (limit > 0) return {limit, "max_memory_per_rank: " + max_memory_per_rank};
  if (limit == 0) return {-1, "max_memory_per_rank: none"};
  MemoryCapacity cap = compute_memory_capacity();
  if (cap.bytes < 0) return {-1, "unknown (nothing to read the memory from)"};
  const bool host = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible;
  if (host && ranks_sharing_host > 1) {
    return {cap.bytes / ranks_sharing_host, cap.source + ", shared by " + std::to_string(ranks_sharing_host) +
                                                " ranks on this host"};
  }
  return {cap.bytes, cap.source};
}

void check_rank_memory(const RankMemoryEstimate& need, const RankMemoryBudget& budget, Communicator& world) {
  const int n = world.size();
  const double mine[2] = {need.total(), budget.bytes};
  std::vector<double> all(2 * static_cast<std::size_t>(n));
  world.iall_gather(mine, all.data(), 2, DType::f64)->wait();
  int worst = -1;
  double worst_excess = 0;
  for (int r = 0; r < n; ++r) {
    const double total = all[2 * r], have = all[2 * r + 1];
    if (have >= 0 && total - have > worst_excess) worst = r, worst_excess = total - have;
  }
  if (worst < 0) return;
  std::ostringstream s;
  s << "max_memory_per_rank: rank " << worst << " needs about " << format_bytes(all[2 * worst]) << " but has "
    << format_bytes(all[2 * worst + 1]);
  if (worst == world.rank()) s << " (" << budget.source << ")";
  s << ". Estimate on rank " << world.rank() << ": " << need.describe()
    << ". What would fit: a higher zero_stage, more ranks, bf16, gradient_checkpointing, a smaller "
       "per_device_train_batch_size or max_seq_length; max_memory_per_rank: none skips this check";
  throw ConfigError(s.str());
}

}  // namespace shardft
