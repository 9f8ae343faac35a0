// The ParamSource side of ZeroEngine: stage 3's gathers of sharded weights (qwZ int8, bf16 or fp32;
// hpZ's node-local secondary copy in backward), the prefetch ahead of compute, and the progress calls
// that keep nonblocking collectives moving while the model computes.
#include <string>

#include "comm/cast_collectives.hpp"
#include "comm/quantized_collectives.hpp"
#include "kernels/elementwise.hpp"
#include "parallel/zero_engine.hpp"

namespace shardft {

void ZeroEngine::gather_unit(int unit, bool nonblocking) {
  const FlatUnit& u = part_.units()[unit];
  const std::size_t shard = static_cast<std::size_t>(u.shard);
  const bool from_secondary = !forward_ && (secondary_[unit].extent(0) > 0 || secondary_bf16_[unit].extent(0) > 0);
  RequestPtr r;
  if (bf16_weights_) {
    // bf16 weights travel and stay as they are: half the bytes of fp32, in flight and gathered.
    if (gathered_bf16_[unit].extent(0) == 0) gathered_bf16_[unit] = pool_.take_bf16(u.padded, "zero_gathered_bf16");
    if (from_secondary) {
      // hpZ: backward gathers the node-local secondary copy; nothing crosses nodes.
      Communicator& sec = *plan_.hpz();
      const std::size_t piece = static_cast<std::size_t>(u.padded) / sec.size();
      r = sec.iall_gather(secondary_bf16_[unit].data(), gathered_bf16_[unit].data(), piece, DType::bf16);
    } else {
      r = group_.iall_gather(shard_weights_bf16_.data() + u.shard_offset, gathered_bf16_[unit].data(), shard,
                             DType::bf16);
    }
  } else {
    if (gathered_[unit].extent(0) == 0) gathered_[unit] = pool_.take(u.padded, "zero_gathered");
    if (from_secondary) {
      Communicator& sec = *plan_.hpz();
      const std::size_t piece = static_cast<std::size_t>(u.padded) / sec.size();
      r = cfg_.dtype == ComputeDtype::bf16
              ? iall_gather_as_bf16(sec, secondary_[unit].data(), piece, gathered_[unit].data())
              : sec.iall_gather(secondary_[unit].data(), gathered_[unit].data(), piece, DType::f32);
    } else {
      const float* mine = shard_weights_.data() + u.shard_offset;
      if (cfg_.quantized_weights) {
        r = iquantized_all_gather_int8(group_, mine, shard, gathered_[unit].data(), cfg_.quantization_block,
                                       nonfinite_);
      } else if (cfg_.dtype == ComputeDtype::bf16) {
        r = iall_gather_as_bf16(group_, mine, shard, gathered_[unit].data());
      } else {
        r = group_.iall_gather(mine, gathered_[unit].data(), shard, DType::f32);
      }
    }
  }
  if (nonblocking) {
    pending_[unit] = std::move(r);
  } else {
    r->wait();
  }
  track_peaks();
}

bool ZeroEngine::is_gathered(int unit) const {
  return gathered_[unit].extent(0) > 0 || gathered_bf16_[unit].extent(0) > 0;
}

void ZeroEngine::give_back_gathered(int unit) {
  pool_.give(gathered_[unit]);
  pool_.give(gathered_bf16_[unit]);
  for (int p : part_.units()[unit].params) pool_.give(widened_[p]);  // copies of what was gathered
}

void ZeroEngine::acquire(int block) {
  if (frozen_) frozen_->acquire(block);
  if (nf4_) nf4_->acquire(block);
  progress();
  if (cfg_.stage < 3) return;
  const int head = layout_.head_block();
  if (block == 0) forward_ = true;  // the model reads the embedding only in forward
  for (int u : part_.units_of_block(block)) {
    ++refcount_[u];
    if (pending_[u]) {
      pending_[u]->wait();
      pending_[u].reset();
    } else if (!is_gathered(u)) {
      gather_unit(u, false);
    }
    if (forward_ && block != head && cfg_.hpz_partition_size > 1) keep_secondary_copy(u);
  }
  if (block == head) forward_ = false;
  prefetch_after(block);
}

// Prefetch the blocks that come next: up the layers in forward, down them in backward. The next block
// always; blocks after it while the weights gathered ahead (in flight or waiting for their acquire)
// stay within prefetch_elements (allgather_bucket_size).
void ZeroEngine::prefetch_after(int block) {
  const int head = layout_.head_block(), dir = forward_ ? 1 : -1;
  // QLoRA's NF4 bytes: the next block's only. prefetch_elements counts compute-dtype elements, and
  // the memory preflight bounds the NF4 bytes gathered at once by two blocks' (nf4_peak_transient_bytes).
  if (nf4_ && block + dir >= 0 && block + dir <= head) nf4_->prefetch(block + dir);
  std::int64_t ahead = 0;
  for (int next = block + dir; next >= 0 && next <= head; next += dir) {
    std::int64_t need = 0;
    for (int u : part_.units_of_block(next)) {
      if (pending_[u]) {
        ahead += part_.units()[u].padded;
      } else if (!is_gathered(u)) {
        need += part_.units()[u].padded;
      }
    }
    if (next != block + dir && (cfg_.prefetch_elements <= 0 || ahead + need > cfg_.prefetch_elements)) return;
    for (int u : part_.units_of_block(next)) {
      if (!pending_[u] && !is_gathered(u)) gather_unit(u, true);
    }
    ahead += need;
  }
}

// Nonblocking collectives advance only inside MPI calls: one test per engine call during compute (a
// test drives every request in flight, so one is enough).
void ZeroEngine::progress() {
  if (frozen_) frozen_->progress();
  if (buckets_) buckets_->progress();
  if (nf4_) nf4_->progress();
  for (const RequestPtr& r : pending_) {
    if (r) {
      r->test();
      return;
    }
  }
}

void ZeroEngine::keep_secondary_copy(int unit) {
  // This rank's 1/h of the unit as gathered in forward (after qwZ's dequantization, so backward sees
  // exactly the weights forward saw); consumed by the unit's backward gather.
  const Communicator& sec = *plan_.hpz();
  const std::int64_t piece = part_.units()[unit].padded / sec.size();
  if (bf16_weights_) {
    if (secondary_bf16_[unit].extent(0) == 0) secondary_bf16_[unit] = pool_.take_bf16(piece, "hpz_secondary_bf16");
    Kokkos::deep_copy(ExecSpace(), secondary_bf16_[unit],
                      Unmanaged1<const bf16>(gathered_bf16_[unit].data() + sec.rank() * piece, piece));
    return;
  }
  if (secondary_[unit].extent(0) == 0) secondary_[unit] = pool_.take(piece, "hpz_secondary");
  Kokkos::deep_copy(ExecSpace(), secondary_[unit], Unmanaged1<const float>(gathered_[unit].data() + sec.rank() * piece, piece));
}

void ZeroEngine::check_acquired(int param) const {
  const int u = part_.unit_of(param);
  if (refcount_[u] == 0 || pending_[u]) {
    throw std::logic_error("weight of '" + layout_.params()[param].name + "' read outside acquire/release");
  }
}

Unmanaged1<const float> ZeroEngine::weight(int param) {
  if (nf4_ && nf4_->holds(param)) return nf4_->weight(param);
  if (!holds(param)) return frozen_->weight(param);
  progress();
  const int u = part_.unit_of(param);
  const std::int64_t n = layout_.params()[param].numel(), off = part_.offset_in_unit(param);
  if (bf16_weights_) {
    // The model reads its matrices through weight_bf16; the norm weights and biases it reads here are
    // widened once and kept until the unit is released (stage 3) or the weights change.
    View1<float>& w = widened_[param];
    if (w.extent(0) == 0) {
      const Unmanaged1<const bf16> src = weight_bf16(param);
      w = pool_.take(n, "zero_widened");
      to_f32(src, w);
    }
    return Unmanaged1<const float>(w.data(), n);
  }
  if (cfg_.stage < 3) return Unmanaged1<const float>(full_weights_.data() + part_.units()[u].full_offset + off, n);
  check_acquired(param);
  return Unmanaged1<const float>(gathered_[u].data() + off, n);
}

Unmanaged1<const bf16> ZeroEngine::weight_bf16(int param) {
  if (nf4_ && nf4_->holds(param)) return nf4_->weight_bf16(param);
  if (!holds(param)) return frozen_->weight_bf16(param);
  if (!bf16_weights_) return {};
  progress();
  const int u = part_.unit_of(param);
  const std::int64_t n = layout_.params()[param].numel(), off = part_.offset_in_unit(param);
  if (cfg_.stage < 3) {
    return Unmanaged1<const bf16>(full_weights_bf16_.data() + part_.units()[u].full_offset + off, n);
  }
  check_acquired(param);
  return Unmanaged1<const bf16>(gathered_bf16_[u].data() + off, n);
}

void ZeroEngine::release(int block) {
  if (frozen_) frozen_->release(block);
  if (nf4_) nf4_->release(block);
  progress();
  if (cfg_.stage < 3) return;
  for (int u : part_.units_of_block(block)) {
    if (--refcount_[u] == 0 && !pending_[u]) give_back_gathered(u);
    if (!forward_ && refcount_[u] == 0) {  // its backward gather is done
      pool_.give(secondary_[u]);
      pool_.give(secondary_bf16_[u]);
    }
  }
}

void ZeroEngine::drain_gathers() {
  for (std::size_t u = 0; u < gathered_.size(); ++u) {
    if (pending_[u]) {
      pending_[u]->wait();
      pending_[u].reset();
    }
    if (refcount_[u] == 0) give_back_gathered(static_cast<int>(u));
    pool_.give(secondary_[u]);
    pool_.give(secondary_bf16_[u]);
  }
}

}  // namespace shardft
