#pragma once
// The engine's per-step transient buffers (stage-3 gathered units, stage-2/3 per-unit gradients,
// gradient-bucket staging), handed back here instead of freed and reused by the next request of the
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
  std::int64_t held_elements() const { return held_; }
  std::int64_t allocations() const { return allocations_; }  // buffers it had to allocate, ever
  std::int64_t takes() const { return takes_; }              // buffers handed out, ever
  std::int64_t drops() const { return drops_; }              // buffers given back while still referenced

 private:
  std::multimap<std::int64_t, View1<float>> free_;
  std::int64_t held_ = 0, allocations_ = 0, takes_ = 0, drops_ = 0;
};

}  // namespace shardft
