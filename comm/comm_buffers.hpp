#pragma once
// Device byte buffers for the comm layer's temporaries (the bf16 copies of cast collectives, the
// quantized payloads of ZeRO++), borrowed from a process-wide free list keyed by exact byte size and
// handed back when the borrower is destroyed. A training step asks for the same sizes every step, so
// after the first step sized them it allocates nothing: on a GPU an allocation is a cudaMalloc and a
// free fences the whole device.
//
// Unlike kernels/kernel_scratch (one buffer per name), any number of buffers of one size may be out at
// once: nonblocking collectives hold theirs until they complete, and several can be in flight.
//
// Handing a buffer back while kernels that use it are still queued is safe when every later user is
// ordered after them on the device: kernels on the one execution space are, and collectives wait for
// the compute stream before they start (comm/nccl). Host thread only. The free buffers are released
// when Kokkos finalizes.
#include <cstddef>
#include <cstdint>

#include "kernels/types.hpp"

namespace shardft {

class CommBuffer {
 public:
  CommBuffer() = default;
  // `bytes` of device memory (aligned for any element type); contents are whatever the last
  // borrower left. `label` names the allocation when the pool has no free buffer of this size.
  CommBuffer(std::size_t bytes, const char* label);
  ~CommBuffer() { release(); }
  CommBuffer(CommBuffer&& other) noexcept;
  CommBuffer& operator=(CommBuffer&& other) noexcept;
  CommBuffer(const CommBuffer&) = delete;
  CommBuffer& operator=(const CommBuffer&) = delete;

  std::size_t bytes() const { return view_.extent(0); }
  std::uint8_t* data() const { return view_.data(); }
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(view_.data());
  }
  template <class T>
  Unmanaged1<T> view(std::size_t n) const {
    return Unmanaged1<T>(as<T>(), n);
  }
  // Back to the pool now (the destructor does the same).
  void release();

 private:
  View1<std::uint8_t> view_;
};

// Bytes held by the pool between uses, and the buffers it has allocated since the process started.
std::size_t comm_buffers_held_bytes();
std::int64_t comm_buffers_allocated();

}  // namespace shardft
