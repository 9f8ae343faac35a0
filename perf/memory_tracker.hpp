#pragma once
// Live and peak bytes of every Kokkos allocation, from Kokkos's tool hooks (the same callbacks a
// Kokkos Tools memory profiler uses). Every activation, gradient, weight and optimizer buffer of a
// step is a View, so on a GPU this is the device memory a rank needs; on the CPU build it is the
// same figure without the process's code, MPI and allocator overhead.
//
// One tracker per process: install() sets the callbacks (after Kokkos::initialize), reset_peak()
// starts a new high-water mark at the current live bytes.
#include <Kokkos_Core.hpp>

#include <cstdint>
#include <map>

namespace shardft::perf {

class MemoryTracker {
 public:
  static void install() {
    Kokkos::Tools::Experimental::set_allocate_data_callback(&on_allocate);
    Kokkos::Tools::Experimental::set_deallocate_data_callback(&on_deallocate);
  }
  static std::int64_t live_bytes() { return state().live; }
  static std::int64_t peak_bytes() { return state().peak; }
  static void reset_peak() { state().peak = state().live; }

 private:
  struct State {
    std::int64_t live = 0, peak = 0;
  };
  static State& state() {
    static State s;
    return s;
  }
  static void on_allocate(Kokkos::Tools::SpaceHandle, const char*, const void*, std::uint64_t size) {
    State& s = state();
    s.live += static_cast<std::int64_t>(size);
    if (s.live > s.peak) s.peak = s.live;
  }
  static void on_deallocate(Kokkos::Tools::SpaceHandle, const char*, const void*, std::uint64_t size) {
    state().live -= static_cast<std::int64_t>(size);
  }
};

}  // namespace shardft::perf
