#pragma once
// The engine's per-step transient buffers (stage-3 gathered units, stage-2/3 per-unit gradients,
// gradient-bucket staging, hpZ's secondary copies), handed back here instead of freed and reused by the next request of the
// same size. Allocating them afresh every block cost twice: on the host each new page is zeroed by
// the kernel when a collective first writes it (about 15 ms per 25 MB on the 2-core VM, the step's
// excess over compute + comm in perf/README.md), and on a GPU cudaFree synchronizes the device,
// which would serialize the NCCL stream with compute.
//
// Footprint: for each buffer size, as many buffers as were ever live at once (a layer block's units
// are all one size, so the stage-3 window and the bucket queue bound it); MemoryReport::pooled
// says how much is held between uses.
#include <cstdint>
#include <map>
#include <string>

#include "kernels/bf16.hpp"
#include "kernels/types.hpp"

namespace shardft {

class BufferPool {
 public:
  // A buffer of exactly n elements; its contents are whatever its last user left (the caller
  // overwrites or zeroes it).
  View1<float> take(std::int64_t n, const std::string& label);
  // Takes v back and leaves it empty. A view something else still references is only dropped, never
  // pooled, so nobody can be handed memory still in use; an empty view is ignored.
  void give(View1<float>& v);
  // The same for bf16 buffers (bf16 compute weights: stage-3 gathered units), pooled apart.
  View1<bf16> take_bf16(std::int64_t n, const std::string& label);
  void give(View1<bf16>& v);
  std::int64_t held_elements() const { return held_ + held_bf16_; }  // of either type
  std::int64_t held_bytes() const { return 4 * held_ + 2 * held_bf16_; }
  std::int64_t allocations() const { return allocations_; }  // buffers it had to allocate, ever
  std::int64_t takes() const { return takes_; }              // buffers handed out, ever
  std::int64_t drops() const { return drops_; }              // buffers given back while still referenced

 private:
  template <class T>
  View1<T> take_from(std::multimap<std::int64_t, View1<T>>& free, std::int64_t& held, std::int64_t n,
                     const std::string& label);
  template <class T>
  void give_to(std::multimap<std::int64_t, View1<T>>& free, std::int64_t& held, View1<T>& v);

  std::multimap<std::int64_t, View1<float>> free_;
  std::multimap<std::int64_t, View1<bf16>> free_bf16_;
  std::int64_t held_bf16_ = 0;
  std::int64_t held_ = 0, allocations_ = 0, takes_ = 0, drops_ = 0;
};

}  // namespace shardft
