// The ParamSource side of ZeroEngine: stage 3's gathers of sharded weights (qwZ int8, bf16 or fp32;
// hpZ's node-local secondary copy in backward), the prefetch ahead of compute, and the progress calls
// that keep nonblocking collectives moving while the model computes.
#include <string>

#include "comm/cast_collectives.hpp"
#include "comm/quantized_collectives.hpp"
#include "parallel/zero_engine.hpp"

namespace shardft {

void ZeroEngine::gather_unit(int unit, bool nonblocking) {
  const FlatUnit& u = part_.units()[unit];
  if (gathered_[unit].extent(0) == 0) {
    gathered_[unit] = pool_.take(u.padded, "zero_gathered");
  }
  const std::size_t shard = static_cast<std::size_t>(u.shard);
  RequestPtr r;
  if (!forward_ && secondary_[unit].extent(0) > 0) {
    // hpZ: backward gathers the node-local secondary copy; nothing crosses nodes.
    Communicator& sec = *plan_.hpz();
    const std::size_t piece = static_cast<std::size_t>(u.padded) / sec.size();
    r = cfg_.dtype == ComputeDtype::bf16 ? iall_gather_as_bf16(sec, secondary_[unit].data(), piece, gathered_[unit].data())
                                         : sec.iall_gather(secondary_[unit].data(), gathered_[unit].data(), piece, DType::f32);
  } else {
    const float* mine = shard_weights_.data() + u.shard_offset;
    if (cfg_.quantized_weights) {
      r = iquantized_all_gather_int8(group_, mine, shard, gathered_[unit].data(), cfg_.quantization_block);
    } else if (cfg_.dtype == ComputeDtype::bf16) {
      r = iall_gather_as_bf16(group_, mine, shard, gathered_[unit].data());
    } else {
      r = group_.iall_gather(mine, gathered_[unit].data(), shard, DType::f32);
    }
  }
  if (nonblocking) {
    pending_[unit] = std::move(r);
  } else {
    r->wait();
  }
  track_peaks();
}

void ZeroEngine::acquire(int block) {
  progress();
  if (cfg_.stage < 3) return;
  const int head = layout_.head_block();
  if (block == 0) forward_ = true;  // the model reads the embedding only in forward
  for (int u : part_.units_of_block(block)) {
    ++refcount_[u];
    if (pending_[u]) {
      pending_[u]->wait();
      pending_[u].reset();
    } else if (gathered_[u].extent(0) == 0) {
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
  std::int64_t ahead = 0;
  for (int next = block + dir; next >= 0 && next <= head; next += dir) {
    std::int64_t need = 0;
    for (int u : part_.units_of_block(next)) {
      if (pending_[u]) {
        ahead += part_.units()[u].padded;
      } else if (gathered_[u].extent(0) == 0) {
        need += part_.units()[u].padded;
      }
    }
    if (next != block + dir && (cfg_.prefetch_elements <= 0 || ahead + need > cfg_.prefetch_elements)) return;
    for (int u : part_.units_of_block(next)) {
      if (!pending_[u] && gathered_[u].extent(0) == 0) gather_unit(u, true);
    }
    ahead += need;
  }
}

// Nonblocking collectives advance only inside MPI calls: one test per engine call during compute (a
// test drives every request in flight, so one is enough).
void ZeroEngine::progress() {
  if (buckets_) buckets_->progress();
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
  if (secondary_[unit].extent(0) == 0) {
    secondary_[unit] = View1<float>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("hpz_secondary")), piece);
  }
  Kokkos::deep_copy(secondary_[unit], Unmanaged1<const float>(gathered_[unit].data() + sec.rank() * piece, piece));
}

Unmanaged1<const float> ZeroEngine::weight(int param) {
  progress();
  const int u = part_.unit_of(param);
  const std::int64_t n = layout_.params()[param].numel(), off = part_.offset_in_unit(param);
  if (cfg_.stage < 3) return Unmanaged1<const float>(full_weights_.data() + part_.units()[u].full_offset + off, n);
  if (refcount_[u] == 0 || pending_[u]) {
    throw std::logic_error("weight of '" + layout_.params()[param].name + "' read outside acquire/release");
  }
  return Unmanaged1<const float>(gathered_[u].data() + off, n);
}

void ZeroEngine::release(int block) {
  progress();
  if (cfg_.stage < 3) return;
  for (int u : part_.units_of_block(block)) {
    if (--refcount_[u] == 0 && !pending_[u]) pool_.give(gathered_[u]);
    if (!forward_ && refcount_[u] == 0) secondary_[u] = View1<float>();  // its backward gather is done
  }
}

void ZeroEngine::drain_gathers() {
  for (std::size_t u = 0; u < gathered_.size(); ++u) {
    if (pending_[u]) {
      pending_[u]->wait();
      pending_[u].reset();
    }
    if (refcount_[u] == 0) pool_.give(gathered_[u]);
    secondary_[u] = View1<float>();
  }
}

}  // namespace shardft
