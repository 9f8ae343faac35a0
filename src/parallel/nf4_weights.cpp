#include "parallel/nf4_weights.hpp"

#include <stdexcept>

#include "kernels/elementwise.hpp"
#include "kernels/fp16.hpp"

namespace shardft {

Nf4Weights::Nf4Weights(const ParamLayout& layout, ComputeDtype dtype, BufferPool& pool)
    : layout_(layout), dtype_(dtype), pool_(pool) {
  index_.assign(layout.params().size(), -1);
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    if (!layout.params()[p].nf4) continue;
    index_[p] = static_cast<int>(params_.size());
    params_.push_back(static_cast<int>(p));
  }
  q_.resize(params_.size());
  dense_.resize(params_.size());
  dense_bf16_.resize(params_.size());
  refcount_.assign(layout.blocks().size(), 0);
}

void Nf4Weights::load(const std::function<void(int param, Unmanaged1<float> out)>& fill) {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const ParamSpec& spec = layout_.params()[params_[i]];
    View1<float> tmp("nf4_load_staging", spec.numel());  // one matrix in full precision at a time
    fill(params_[i], tmp);
    q_[i] = nf4_quantize(tmp, spec.shape, spec.name);
    pool_.give(dense_[i]);
    pool_.give(dense_bf16_[i]);
  }
}

void Nf4Weights::acquire(int block) { ++refcount_[block]; }

void Nf4Weights::release(int block) {
  if (refcount_[block] > 0 && --refcount_[block] == 0) give_back(block);
}

void Nf4Weights::give_back(int block) {
  for (int p : layout_.blocks()[block].params) {
    if (!holds(p)) continue;
    pool_.give(dense_[index_[p]]);
    pool_.give(dense_bf16_[index_[p]]);
  }
}

void Nf4Weights::dequantize_into(int param, Unmanaged1<float> dst) const {
  nf4_dequantize(q_[index_[param]], dst);
  if (dtype_ == ComputeDtype::fp16) round_to_fp16(dst, dst);
}

Unmanaged1<const bf16> Nf4Weights::weight_bf16(int param) {
  if (dtype_ != ComputeDtype::bf16) return {};
  const int i = index_[param];
  if (dense_bf16_[i].extent(0) == 0) {
    dense_bf16_[i] = pool_.take_bf16(q_[i].numel, "nf4_dequantized_bf16");
    nf4_dequantize(q_[i], Unmanaged1<bf16>(dense_bf16_[i].data(), q_[i].numel));
  }
  return Unmanaged1<const bf16>(dense_bf16_[i].data(), q_[i].numel);
}

Unmanaged1<const float> Nf4Weights::weight(int param) {
  const int i = index_[param];
  if (dense_[i].extent(0) == 0) {
    dense_[i] = pool_.take(q_[i].numel, "nf4_dequantized");
    if (dtype_ == ComputeDtype::bf16) {
      to_f32(weight_bf16(param), Unmanaged1<float>(dense_[i].data(), q_[i].numel));
    } else {
      dequantize_into(param, Unmanaged1<float>(dense_[i].data(), q_[i].numel));
    }
  }
  return Unmanaged1<const float>(dense_[i].data(), q_[i].numel);
}

void Nf4Weights::read(int param, Unmanaged1<float> dst) const {
  const Nf4Tensor& q = q_[index_[param]];
  if (dtype_ == ComputeDtype::bf16) {
    View1<bf16> tmp("nf4_read_bf16", q.numel);
    nf4_dequantize(q, Unmanaged1<bf16>(tmp.data(), q.numel));
    to_f32(tmp, dst);
  } else {
    dequantize_into(param, dst);
  }
}

std::int64_t Nf4Weights::storage_bytes() const {
  std::int64_t n = 0;
  for (int p : params_) n += nf4_storage_bytes(layout_.params()[p].numel());
  return n;
}

}  // namespace shardft
