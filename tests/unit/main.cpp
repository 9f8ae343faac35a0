// gtest entry point for the single-process tests: Kokkos lives for the whole run. Listing the tests
// (CMake's test discovery) starts no Kokkos: no device is touched just to name them.
#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include "kernels/device_traffic.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (::testing::GTEST_FLAG(list_tests)) return RUN_ALL_TESTS();
  Kokkos::ScopeGuard kokkos(argc, argv);
  shardft::install_device_traffic_hooks();
  return RUN_ALL_TESTS();
}
