#include "parallel/zero/weight_buffer.hpp"

#include "kernels/elementwise.hpp"

namespace shardft {

WeightBuffer::WeightBuffer(WeightStorage storage, std::int64_t n, const std::string& label) : storage_(storage) {
  if (storage == WeightStorage::bf16) {
    bf16_ = View1<bf16>(label, n);
  } else {
    f32_ = View1<float>(label, n);
  }
}

WeightBuffer WeightBuffer::over(View1<float> f32) {
  WeightBuffer b;
  b.f32_ = f32;
  return b;
}

WeightBuffer WeightBuffer::take(BufferPool& pool, WeightStorage storage, std::int64_t n, const std::string& label) {
  WeightBuffer b;
  b.storage_ = storage;
  if (storage == WeightStorage::bf16) {
    b.bf16_ = pool.take_bf16(n, label);
  } else {
    b.f32_ = pool.take(n, label);
  }
  return b;
}

void WeightBuffer::give(BufferPool& pool) {
  pool.give(f32_);
  pool.give(bf16_);
}

std::int64_t WeightBuffer::size() const {
  return static_cast<std::int64_t>(storage_ == WeightStorage::bf16 ? bf16_.extent(0) : f32_.extent(0));
}

void* WeightBuffer::at(std::int64_t offset) const {
  if (storage_ == WeightStorage::bf16) return bf16_.data() + offset;
  return f32_.data() + offset;
}

Unmanaged1<const float> WeightBuffer::f32(std::int64_t offset, std::int64_t n) const {
  if (storage_ == WeightStorage::bf16) return {};
  return Unmanaged1<const float>(f32_.data() + offset, n);
}

Unmanaged1<const bf16> WeightBuffer::bf16s(std::int64_t offset, std::int64_t n) const {
  if (storage_ != WeightStorage::bf16) return {};
  return Unmanaged1<const bf16>(bf16_.data() + offset, n);
}

ComputeWeights WeightBuffer::as_target(RunCast cast) const {
  if (storage_ == WeightStorage::bf16) return {bf16_, {}, RunCast::copy};
  return {{}, f32_, cast};
}

void WeightBuffer::copy_from(const WeightBuffer& src, std::int64_t src_offset, std::int64_t n) {
  if (storage_ == WeightStorage::bf16) {
    Kokkos::deep_copy(ExecSpace(), bf16_, Unmanaged1<const bf16>(src.bf16_.data() + src_offset, n));
  } else {
    Kokkos::deep_copy(ExecSpace(), f32_, Unmanaged1<const float>(src.f32_.data() + src_offset, n));
  }
}

View1<float> WeightBuffer::widened() const {
  if (storage_ != WeightStorage::bf16) return f32_;
  View1<float> w("zero_widened_weights", bf16_.extent(0));
  to_f32(bf16_, w);
  return w;
}

}  // namespace shardft
