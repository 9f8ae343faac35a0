#include "parallel/grad_buckets.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "comm/cast_collectives.hpp"
#include "kernels/elementwise.hpp"

namespace shardft {

void OwnedShardWrites::begin_step() { std::fill(written_.begin(), written_.end(), 0); }

bool OwnedShardWrites::mark(int unit) {
  const bool before = written_[unit] != 0;
  written_[unit] = 1;
  return before;
}

void OwnedShardWrites::zero_unwritten(const View1<float>& owned) const {
  const std::vector<FlatUnit>& units = part_.units();
  for (std::size_t u = 0; u < units.size();) {
    if (written_[u] || units[u].shard == 0) {
      ++u;
      continue;
    }
    const std::int64_t begin = units[u].shard_offset;
    std::int64_t end = begin;
    for (; u < units.size() && !written_[u] && units[u].shard_offset == end; ++u) end += units[u].shard;
    Kokkos::deep_copy(ExecSpace(), Unmanaged1<float>(owned.data() + begin, end - begin), 0.f);
  }
}

GradBuckets::GradBuckets(const FlatPartition& part, Communicator& group, View1<float> owned,
                         const GradBucketOptions& opt, BufferPool& pool)
    : part_(part), group_(group), owned_(owned), opt_(opt), pool_(pool), writes_(part) {}

void GradBuckets::add(int unit, const float* grad, View1<float>&& keep) {
  const std::int64_t n = part_.units()[unit].padded;
  // DeepSpeed's rule: send what is open before this unit would take it past the bucket size.
  if (!open_.empty() && open_elements_ + n > opt_.bucket_elements) launch();
  open_.push_back({unit, grad, keep});
  keep = View1<float>();  // the bucket's is the only reference now, so it can pool the buffer
  open_elements_ += n;
  if (open_elements_ >= opt_.bucket_elements) launch();
  progress();
}

void GradBuckets::flush() {
  if (!open_.empty()) launch();
}

void GradBuckets::launch() {
  Bucket b;
  std::int64_t shard_total = 0;
  for (const Piece& p : open_) {
    b.units.push_back(p.unit);
    shard_total += part_.units()[p.unit].shard;
  }
  const float* send = nullptr;
  if (open_.size() == 1) {  // the unit's own buffer is already laid out rank-major
    send = open_[0].grad;
    b.keep_unit = open_[0].keep;
    open_[0].keep = View1<float>();
  } else {
    b.send = pool_.take(shard_total * group_.size(), "grad_bucket_send");
    std::int64_t at = 0;  // this unit's offset inside each rank's block of the bucket
    for (const Piece& p : open_) {
      const std::int64_t s = part_.units()[p.unit].shard;
      for (int r = 0; r < group_.size(); ++r) {
        Kokkos::deep_copy(ExecSpace(), Unmanaged1<float>(b.send.data() + r * shard_total + at, s),
                          Unmanaged1<const float>(p.grad + r * s, s));
      }
      at += s;
    }
    for (Piece& p : open_) pool_.give(p.keep);  // copied into the bucket
    send = b.send.data();
  }
  const std::size_t count = static_cast<std::size_t>(shard_total);
  // Whether each unit's shard was written before in this step (then the reduction adds to it).
  bool all_new = true, all_written = true;
  for (int u : b.units) {
    b.adds.push_back(writes_.mark(u) ? 1 : 0);
    (b.adds.back() ? all_new : all_written) = false;
  }
  // Straight into `owned` where the bucket's shards lie there side by side (always for one unit), so
  // no staging is held while in flight (how many buckets are in flight at once depends on timing, and
  // so would its pooling): the fp32 reduction writes there when every shard is new; the bf16 one is
  // widened in wait(), written or added (the same fp32 add as add_inplace) when all shards agree.
  const bool adjacent = shards_adjacent(b.units);
  b.direct = adjacent && (all_new || (opt_.bf16 && all_written));
  if (!b.direct) b.recv = pool_.take(shard_total, "grad_bucket_recv");
  float* out = b.direct ? owned_.data() + part_.units()[b.units.front()].shard_offset : b.recv.data();
  if (opt_.bf16) {
    // The bf16 copy of the send is made here, so the fp32 gradients can go at once.
    b.request = ireduce_scatter_as_bf16(group_, send, count, out, b.direct && all_written);
    pool_.give(b.send);
    pool_.give(b.keep_unit);
  } else {
    b.request = group_.ireduce_scatter(send, out, count, DType::f32, ReduceOp::sum);
  }
  open_.clear();
  open_elements_ = 0;
  inflight_.push_back(std::move(b));
  b.send = b.recv = b.keep_unit = View1<float>();  // Kokkos 3.4 copies views on move: leave one reference
  ++started_;
  if (!opt_.overlap) complete_front();  // the blocking reduction: nothing is left in flight
}

bool GradBuckets::shards_adjacent(const std::vector<int>& units) const {
  for (std::size_t i = 1; i < units.size(); ++i) {
    const FlatUnit& prev = part_.units()[units[i - 1]];
    if (part_.units()[units[i]].shard_offset != prev.shard_offset + prev.shard) return false;
  }
  return !units.empty();
}

void GradBuckets::complete_front() {
  Bucket& b = inflight_.front();
  b.request->wait();
  if (!b.direct) {  // else the reduction put it there
    std::int64_t at = 0;
    for (std::size_t i = 0; i < b.units.size(); ++i) {
      const FlatUnit& fu = part_.units()[b.units[i]];
      const Unmanaged1<float> shard(owned_.data() + fu.shard_offset, fu.shard);
      const Unmanaged1<const float> reduced(b.recv.data() + at, fu.shard);
      if (b.adds[i]) {
        add_inplace(shard, reduced);
      } else {
        Kokkos::deep_copy(ExecSpace(), shard, reduced);
      }
      at += fu.shard;
    }
  }
  pool_.give(b.send);
  pool_.give(b.recv);
  pool_.give(b.keep_unit);
  inflight_.pop_front();
}

void GradBuckets::progress() {
  // In issue order only: a later bucket may finish first, but it is added after the earlier ones so
  // that the owned gradient sums micro-batches and buckets in one fixed order.
  while (!inflight_.empty() && inflight_.front().request->test()) {
    complete_front();
    ++completed_during_compute_;
  }
}

void GradBuckets::finish() {
  flush();
  while (!inflight_.empty()) complete_front();
}

void GradBuckets::finish_step() {
  finish();
  writes_.zero_unwritten(owned_);
}

std::int64_t GradBuckets::held_elements() const {
  std::int64_t n = open_elements_;
  for (const Bucket& b : inflight_) {
    n += static_cast<std::int64_t>(b.send.extent(0) + b.recv.extent(0) + b.keep_unit.extent(0));
  }
  return n;
}

}  // namespace shardft
