#include "parallel/zero/nf4_weights.hpp"

#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include "kernels/elementwise.hpp"
#include "kernels/fp16.hpp"

namespace shardft {

namespace {
std::int64_t per_rank(std::int64_t bytes, int shards) { return (bytes + shards - 1) / shards; }

// This rank's piece [rank * piece, (rank + 1) * piece) of src, zero past its end.
View1<std::uint8_t> piece_of(const View1<std::uint8_t>& src, int rank, std::int64_t piece) {
  View1<std::uint8_t> out("nf4_shard", piece);
  const std::int64_t n = static_cast<std::int64_t>(src.extent(0));
  const std::int64_t b = std::min(n, rank * piece), e = std::min(n, b + piece);
  if (e > b) {
    Kokkos::deep_copy(Kokkos::subview(out, std::make_pair(std::int64_t(0), e - b)),
                      Kokkos::subview(src, std::make_pair(b, e)));
  }
  return out;
}
}  // namespace

void nf4_dequantize_as_read(Unmanaged1<const std::uint8_t> packed, Unmanaged1<const std::uint8_t> absmax_q,
                            Unmanaged1<const float> absmax2, float offset, ComputeDtype dtype, Unmanaged1<float> dst) {
  nf4_dequantize(packed, absmax_q, absmax2, offset, dst);
  if (dtype == ComputeDtype::bf16) round_to_bf16(dst, dst);
  if (dtype == ComputeDtype::fp16) round_to_fp16(dst, dst);
}

std::int64_t nf4_held_bytes(std::int64_t n, int shards) {
  return per_rank(nf4_packed_bytes(n), shards) + per_rank(nf4_blocks(n), shards) + 4 * nf4_absmax_blocks(n) + 4;
}

std::int64_t nf4_gathered_bytes(std::int64_t n, int shards) {
  const std::int64_t bytes = shards * (per_rank(nf4_packed_bytes(n), shards) + per_rank(nf4_blocks(n), shards));
  return 4 * ((bytes + 3) / 4);
}

std::int64_t nf4_peak_transient_bytes(const ParamLayout& layout, ComputeDtype dtype, int shards) {
  const std::int64_t per_value = dtype == ComputeDtype::bf16 ? 2 : 4;
  const std::size_t blocks = layout.blocks().size();
  std::vector<std::int64_t> dense(blocks, 0), gathered(blocks, 0);
  for (std::size_t b = 0; b < blocks; ++b) {
    for (int p : layout.blocks()[b].params) {
      const ParamSpec& spec = layout.params()[p];
      if (!spec.nf4) continue;
      dense[b] += per_value * spec.numel();
      if (shards > 0) gathered[b] += nf4_gathered_bytes(spec.numel(), shards);
    }
  }
  std::int64_t peak = 0;
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::int64_t before = b > 0 ? gathered[b - 1] : 0, after = b + 1 < blocks ? gathered[b + 1] : 0;
    peak = std::max(peak, dense[b] + gathered[b] + std::max(before, after));
  }
  return peak;
}

Nf4Weights::Nf4Weights(const ParamLayout& layout, ComputeDtype dtype, BufferPool& pool, Communicator* shard_group)
    : layout_(layout), dtype_(dtype), pool_(pool), group_(shard_group) {
  index_.assign(layout.params().size(), -1);
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    if (!layout.params()[p].nf4) continue;
    index_[p] = static_cast<int>(params_.size());
    params_.push_back(static_cast<int>(p));
  }
  q_.resize(params_.size());
  own_.resize(params_.size());
  in_flight_.resize(params_.size());
  widened_.resize(params_.size());
  refcount_.assign(layout.blocks().size(), 0);
  block_dense_.resize(layout.blocks().size());
  block_numel_.assign(layout.blocks().size(), 0);
  block_of_.assign(params_.size(), -1);
  dense_at_.assign(params_.size(), 0);
  dequantized_.assign(params_.size(), 0);
  for (std::size_t b = 0; b < layout.blocks().size(); ++b) {
    for (int p : layout.blocks()[b].params) {
      if (!holds(p)) continue;
      block_of_[index_[p]] = static_cast<int>(b);
      dense_at_[index_[p]] = block_numel_[b];
      block_numel_[b] += layout.params()[p].numel();
    }
  }
}

void Nf4Weights::load(const std::function<void(int param, Unmanaged1<float> out)>& fill, const StoredNf4& stored) {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const ParamSpec& spec = layout_.params()[params_[i]];
    if (group_) drop_gathered(i);  // bytes prefetched (e.g. by a forward-only pass) are of the old weights
    std::optional<Nf4Tensor> as_stored = stored ? stored(params_[i]) : std::nullopt;
    if (as_stored) {
      if (as_stored->shape != spec.shape) throw std::invalid_argument("stored NF4 '" + spec.name + "' has another shape");
      q_[i] = std::move(*as_stored);
    } else {
      View1<float> tmp("nf4_load_staging", spec.numel());  // one matrix in full precision at a time
      fill(params_[i], tmp);
      q_[i] = nf4_quantize(tmp, spec.shape, spec.name);
    }
    if (group_) {
      const int n = group_->size(), r = group_->rank();
      q_[i].packed = piece_of(q_[i].packed, r, per_rank(nf4_packed_bytes(spec.numel()), n));
      q_[i].absmax_q = piece_of(q_[i].absmax_q, r, per_rank(nf4_blocks(spec.numel()), n));
      own_[i] = Bytes{};
    } else {
      own_[i] = Bytes{Unmanaged1<std::uint8_t>(q_[i].packed.data(), q_[i].packed.extent(0)),
                      Unmanaged1<std::uint8_t>(q_[i].absmax_q.data(), q_[i].absmax_q.extent(0)), {}};
    }
  }
  for (std::size_t b = 0; b < block_dense_.size(); ++b) give_dense(static_cast<int>(b));
}

View1<float> Nf4Weights::take(std::int64_t n, const char* label) {
  View1<float> v = pool_.take(n, label);
  live_ += static_cast<std::int64_t>(sizeof(float)) * n;
  peak_ = std::max(peak_, live_);
  return v;
}

void Nf4Weights::give(View1<float>& v) {
  live_ -= static_cast<std::int64_t>(sizeof(float) * v.extent(0));
  pool_.give(v);
}

bool Nf4Weights::block_gathered(int block) const {
  for (int p : layout_.blocks()[block].params) {
    if (holds(p) && own_[index_[p]].packed.extent(0) > 0) return true;
  }
  return false;
}

void Nf4Weights::prefetch(int block) {
  if (!group_ || refcount_[block] > 0 || block_gathered(block)) return;
  bool any = false;
  for (int p : layout_.blocks()[block].params) {
    if (!holds(p)) continue;
    own_[index_[p]] = gather(index_[p], true);
    any = true;
  }
  if (any) ++counts_.prefetched;
}

void Nf4Weights::acquire(int block) {
  if (refcount_[block]++ > 0 || !group_) return;
  const bool prefetched = block_gathered(block);
  bool any = false;
  for (int p : layout_.blocks()[block].params) {
    if (!holds(p)) continue;
    const int i = index_[p];
    if (prefetched) {
      finish_gather(i);
    } else {
      own_[i] = gather(i, false);
    }
    any = true;
  }
  if (any && !prefetched) ++counts_.at_acquire;
}

void Nf4Weights::progress() {
  for (const auto& requests : in_flight_) {
    if (!requests.empty()) {
      requests.front()->test();
      return;
    }
  }
}

Nf4Weights::Bytes Nf4Weights::gather(int i, bool nonblocking) {
  const int n = group_->size();
  const std::int64_t packed = q_[i].packed.extent(0), absmax = q_[i].absmax_q.extent(0);  // per rank
  Bytes b;
  b.store = take(nf4_gathered_bytes(q_[i].numel, n) / 4, "nf4_gathered_bytes");
  std::uint8_t* bytes = reinterpret_cast<std::uint8_t*>(b.store.data());
  b.packed = Unmanaged1<std::uint8_t>(bytes, packed * n);
  b.absmax_q = Unmanaged1<std::uint8_t>(bytes + packed * n, absmax * n);
  in_flight_[i].push_back(
      group_->iall_gather(q_[i].packed.data(), b.packed.data(), static_cast<std::size_t>(packed), DType::u8));
  in_flight_[i].push_back(
      group_->iall_gather(q_[i].absmax_q.data(), b.absmax_q.data(), static_cast<std::size_t>(absmax), DType::u8));
  if (!nonblocking) finish_gather(i);
  return b;
}

void Nf4Weights::finish_gather(int i) {
  for (RequestPtr& r : in_flight_[i]) r->wait();
  in_flight_[i].clear();
}

const Nf4Weights::Bytes& Nf4Weights::whole(int param) const {
  const Bytes& b = own_[index_[param]];
  if (b.packed.extent(0) == 0) {
    throw std::logic_error("NF4 weight of '" + layout_.params()[param].name + "' read outside acquire/release");
  }
  return b;
}

void Nf4Weights::release(int block) {
  if (refcount_[block] > 0 && --refcount_[block] == 0) give_back(block);
}

void Nf4Weights::give_back(int block) {
  give_dense(block);
  for (int p : layout_.blocks()[block].params) {
    if (holds(p) && group_) drop_gathered(index_[p]);
  }
}

void Nf4Weights::drop_gathered(int i) {
  finish_gather(i);  // a buffer a collective still writes into is never given back
  give(own_[i].store);
  own_[i] = Bytes{};
}

void Nf4Weights::dequantize(int param, Unmanaged1<float> dst) const {
  const Nf4Tensor& q = q_[index_[param]];
  const Bytes& b = whole(param);
  nf4_dequantize_as_read(b.packed, b.absmax_q, q.absmax2, q.offset, dtype_, dst);
}

void Nf4Weights::dequantize(int param, Unmanaged1<bf16> dst) const {
  const Nf4Tensor& q = q_[index_[param]];
  const Bytes& b = whole(param);
  nf4_dequantize(b.packed, b.absmax_q, q.absmax2, q.offset, dst);
}

WeightStorage Nf4Weights::storage() const {
  return dtype_ == ComputeDtype::bf16 ? WeightStorage::bf16 : WeightStorage::f32;
}

const WeightBuffer& Nf4Weights::dense(int i) {
  const int block = block_of_[i];
  WeightBuffer& d = block_dense_[block];
  const bool b16 = storage() == WeightStorage::bf16;
  if (d.empty()) {
    d = WeightBuffer::take(pool_, storage(), block_numel_[block], b16 ? "nf4_dequantized_bf16" : "nf4_dequantized");
    live_ += d.bytes();
    peak_ = std::max(peak_, live_);
  }
  if (dequantized_[i]) return d;
  const std::int64_t n = q_[i].numel;
  if (b16) {
    dequantize(params_[i], Unmanaged1<bf16>(static_cast<bf16*>(d.at(dense_at_[i])), n));
  } else {
    dequantize(params_[i], Unmanaged1<float>(static_cast<float*>(d.at(dense_at_[i])), n));
  }
  dequantized_[i] = 1;
  return d;
}

void Nf4Weights::give_dense(int block) {
  live_ -= block_dense_[block].bytes();
  block_dense_[block].give(pool_);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (block_of_[i] != block) continue;
    dequantized_[i] = 0;
    give(widened_[i]);
  }
}

Unmanaged1<const bf16> Nf4Weights::weight_bf16(int param) {
  if (storage() != WeightStorage::bf16) return {};
  const int i = index_[param];
  return dense(i).bf16s(dense_at_[i], q_[i].numel);
}

Unmanaged1<const float> Nf4Weights::weight(int param) {
  const int i = index_[param];
  const std::int64_t n = q_[i].numel;
  if (storage() != WeightStorage::bf16) return dense(i).f32(dense_at_[i], n);
  // The model reads bf16 matrices through weight_bf16; a caller asking for fp32 gets them widened, kept
  // until the block's last release.
  if (widened_[i].extent(0) == 0) {
    widened_[i] = take(n, "nf4_dequantized");
    to_f32(weight_bf16(param), Unmanaged1<float>(widened_[i].data(), n));
  }
  return Unmanaged1<const float>(widened_[i].data(), n);
}

void Nf4Weights::read(int param, Unmanaged1<float> dst) {
  const int i = index_[param];
  const bool gathered_here = group_ && own_[i].packed.extent(0) == 0;
  if (gathered_here) {
    own_[i] = gather(i, false);
  } else if (group_) {
    finish_gather(i);  // prefetched: its bytes may still be on the wire
  }
  const Bytes& b = whole(param);
  nf4_dequantize_as_read(b.packed, b.absmax_q, q_[i].absmax2, q_[i].offset, dtype_, dst);
  if (gathered_here) drop_gathered(i);
}

std::int64_t Nf4Weights::storage_bytes() const {
  std::int64_t n = 0;
  for (int p : params_) n += nf4_held_bytes(layout_.params()[p].numel(), group_ ? group_->size() : 1);
  return n;
}

}  // namespace shardft
