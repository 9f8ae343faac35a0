#pragma once
// Pieces the training forward (model/decoder.cpp) and the cached generation forward
// (model/decoder_cache.cpp) share, so the two run the same arithmetic by construction.
#include <string>

#include "kernels/elementwise.hpp"
#include "model/decoder.hpp"

namespace shardft::decoder_parts {

// A device buffer that only grows, handing out exactly-shaped views: micro-batches of different padded
// lengths, and decode steps of shrinking batches, reuse the same memory. mat / vec grow it when asked for
// more than it holds, which invalidates earlier views; the training forward reserves first, so its views
// stay put through a step.
class GrowingBuffer {
 public:
  explicit GrowingBuffer(const char* name) : name_(name) {}
  void reserve(std::int64_t n) {
    if (static_cast<std::int64_t>(data_.extent(0)) < n) data_ = View1<float>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(name_)), n);
  }
  Unmanaged2<float> mat(std::int64_t rows, std::int64_t cols) {
    reserve(rows * cols);
    return Unmanaged2<float>(data_.data(), rows, cols);
  }
  Unmanaged1<float> vec(std::int64_t n) {
    reserve(n);
    return Unmanaged1<float>(data_.data(), n);
  }

 private:
  const char* name_;
  View1<float> data_;
};

// bf16 compute: a GEMM input is rounded to bf16 values (kept in fp32 buffers).
inline void round_if_bf16(ComputeDtype dtype, Unmanaged2<float> x) {
  if (dtype == ComputeDtype::bf16) round_to_bf16(flat(Unmanaged2<const float>(x)), flat(x));
}

// The gate and up projections as one [2I, d] matrix, for the fused gate-up GEMM: adjacent in the layout
// (and in every unit of the sharding engine), so normally a view; otherwise copied side by side into `copy`.
inline Unmanaged2<const float> gate_up_weight(ParamSource& params, const LayerParams& P, std::int64_t I, std::int64_t d,
                                              GrowingBuffer& copy) {
  auto gate = params.weight(P.gate_proj), up = params.weight(P.up_proj);
  if (up.data() == gate.data() + I * d) return Unmanaged2<const float>(gate.data(), 2 * I, d);
  auto both = copy.vec(2 * I * d);
  Kokkos::deep_copy(Unmanaged1<float>(both.data(), I * d), gate);
  Kokkos::deep_copy(Unmanaged1<float>(both.data() + I * d, I * d), up);
  return Unmanaged2<const float>(both.data(), 2 * I, d);
}

}  // namespace shardft::decoder_parts
