// gtest entry point for tests run under mpirun: MPI and Kokkos live for the whole run, and only
// rank 0 prints (a failure on any rank still fails its exit code, and so mpirun's).
#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>
#include <mpi.h>

#include "kernels/device_traffic.hpp"
#include "kernels/kernel_timer.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int result = 0;
  {
    shardft::declare_unfenced_kernel_callbacks();  // before Kokkos starts (kernels/kernel_timer.hpp)
    Kokkos::ScopeGuard kokkos(argc, argv);
    shardft::install_device_traffic_hooks();
    result = RUN_ALL_TESTS();
  }
  // Every rank's verdict decides: a failure seen only on rank 1 still fails rank 0's summary line.
  int worst = result;
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && worst != 0 && result == 0) std::printf("[  FAILED  ] a test failed on another rank\n");
  MPI_Finalize();
  return worst;
}
