#pragma once
// A device buffer that only grows, handing out exactly-shaped views: micro-batches of different padded
// lengths, and decode steps of shrinking batches, reuse the same memory.
#include <string>

#include "kernels/bf16.hpp"
#include "kernels/types.hpp"

namespace shardft {

// mat / vec grow the buffer when asked for more than it holds, which invalidates earlier views. Within
// one step each buffer is asked for one size only, so the views a step hands from forward to backward
// stay put.
template <class T>
class GrowingBufferOf {
 public:
  explicit GrowingBufferOf(const char* name) : name_(name) {}
  void reserve(std::int64_t n) {
    if (static_cast<std::int64_t>(data_.extent(0)) < n) {
      data_ = View1<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(name_)), n);
    }
  }
  Unmanaged2<T> mat(std::int64_t rows, std::int64_t cols) { return mat_at(0, rows, cols); }
  // Several matrices side by side in one buffer: this one from element `offset` on.
  Unmanaged2<T> mat_at(std::int64_t offset, std::int64_t rows, std::int64_t cols) {
    reserve(offset + rows * cols);
    return Unmanaged2<T>(data_.data() + offset, rows, cols);
  }
  Unmanaged1<T> vec(std::int64_t n) {
    reserve(n);
    return Unmanaged1<T>(data_.data(), n);
  }
  // The first n elements as a view that shares ownership of the memory (it stays valid if the buffer
  // grows later).
  View1<T> shared_vec(std::int64_t n) {
    reserve(n);
    return Kokkos::subview(data_, std::make_pair(std::int64_t{0}, n));
  }

 private:
  const char* name_;
  View1<T> data_;
};

using GrowingBuffer = GrowingBufferOf<float>;
using GrowingBufferBf16 = GrowingBufferOf<bf16>;  // bf16 compute: weights and GEMM inputs as bf16

}  // namespace shardft
