#pragma once
// Live and peak bytes of every Kokkos allocation, from Kokkos's tool hooks (kernels/device_traffic.hpp
// holds them: one set of hooks per process). Every activation, gradient, weight and optimizer buffer of
// a step is a View, so on a GPU this is the device memory a rank needs; on the CPU build it is the
// same figure without the process's code, MPI and allocator overhead.
//
// install() sets the hooks (after Kokkos::initialize), reset_peak() starts a new high-water mark at the
// current live bytes.
#include <cstdint>

#include "kernels/device_traffic.hpp"

namespace shardft::perf {

class MemoryTracker {
 public:
  static void install() { install_device_traffic_hooks(); }
  static std::int64_t live_bytes() { return device_live_bytes(); }
  static std::int64_t peak_bytes() { return device_peak_bytes(); }
  static void reset_peak() { reset_device_peak(); }
};

}  // namespace shardft::perf
