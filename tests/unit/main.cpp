// gtest entry point for the single-process tests: Kokkos lives for the whole run. Listing the tests
// (CMake's test discovery) starts no Kokkos: no device is touched just to name them.
//
// SHARDFT_TEST_NO_KOKKOS=1 runs the selected tests without starting Kokkos. A CUDA Kokkos aborts at
// start on a machine without a GPU, so this is how a GPU build runs its host-only tests there (e.g.
// --gtest_filter='CudnnAttentionNoDevice.*'); a selected test that uses Kokkos then fails.
#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "kernels/device_traffic.hpp"
#include "kernels/kernel_timer.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (::testing::GTEST_FLAG(list_tests)) return RUN_ALL_TESTS();
  const char* no_kokkos = std::getenv("SHARDFT_TEST_NO_KOKKOS");
  if (no_kokkos && std::strcmp(no_kokkos, "1") == 0) return RUN_ALL_TESTS();
  shardft::declare_unfenced_kernel_callbacks();  // before Kokkos starts (kernels/kernel_timer.hpp)
  Kokkos::ScopeGuard kokkos(argc, argv);
  shardft::install_device_traffic_hooks();
  return RUN_ALL_TESTS();
}
