// Entry point of shardft_bench: Kokkos lives for the whole run and BLAS runs on one thread, as in a
// shardft rank (one rank per core). Benchmarks register themselves from the other perf/*.cpp files.
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <string>

#include "kernels/gemm.hpp"
#include "kernels/kernel_timer.hpp"
#include "kernels/types.hpp"

int main(int argc, char** argv) {
  shardft::declare_unfenced_kernel_callbacks();  // before Kokkos starts (kernels/kernel_timer.hpp)
  Kokkos::ScopeGuard kokkos;
  shardft::gemm_set_num_threads(1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("shardft_exec_space", shardft::ExecSpace::name());
  benchmark::AddCustomContext("shardft_blas_threads", "1");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
