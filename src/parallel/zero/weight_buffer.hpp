#pragma once
// Compute weights in their storage type, one type for both so that a store holds one member per buffer:
// bf16 storage for bf16 compute (half the bytes; the GEMMs read it as it is), fp32 storage otherwise
// (fp32 compute; fp16 compute as fp16 values; bf16 values under qwZ, whose int8 gathers dequantize
// into fp32). A collective moves the buffer's elements in its dtype().
#include <cstdint>
#include <string>

#include "comm/communicator.hpp"
#include "kernels/adamw.hpp"
#include "kernels/bf16.hpp"
#include "kernels/types.hpp"
#include "parallel/buffer_pool.hpp"

namespace shardft {

enum class WeightStorage { f32, bf16 };

class WeightBuffer {
 public:
  WeightBuffer() = default;
  WeightBuffer(WeightStorage storage, std::int64_t n, const std::string& label);
  static WeightBuffer over(View1<float> f32);  // an existing fp32 buffer (shared, not copied)
  // A buffer of n elements from the pool (contents undefined); give() hands it back and empties it.
  static WeightBuffer take(BufferPool& pool, WeightStorage storage, std::int64_t n, const std::string& label);
  void give(BufferPool& pool);

  WeightStorage storage() const { return storage_; }
  std::int64_t size() const;
  bool empty() const { return size() == 0; }
  std::int64_t bytes() const { return size() * (storage_ == WeightStorage::bf16 ? 2 : 4); }
  DType dtype() const { return storage_ == WeightStorage::bf16 ? DType::bf16 : DType::f32; }
  // The element at `offset` as a raw pointer, for collectives.
  void* at(std::int64_t offset) const;
  // n elements from `offset`; empty where the storage is the other type.
  Unmanaged1<const float> f32(std::int64_t offset, std::int64_t n) const;
  Unmanaged1<const bf16> bf16s(std::int64_t offset, std::int64_t n) const;
  View1<float> f32_view() const { return f32_; }
  // Where an update writes these weights (kernels/adamw.hpp): fp32 storage rounds as `cast` says.
  ComputeWeights as_target(RunCast cast) const;
  // The first n elements from `src` (same storage), on the compute stream.
  void copy_from(const WeightBuffer& src, std::int64_t src_offset, std::int64_t n);
  // The whole buffer as fp32 (a widened copy for bf16 storage; the buffer itself for fp32).
  View1<float> widened() const;

 private:
  WeightStorage storage_ = WeightStorage::f32;
  View1<float> f32_;
  View1<bf16> bf16_;
};

}  // namespace shardft
