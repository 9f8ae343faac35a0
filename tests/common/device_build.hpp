#pragma once
// Whether this test binary computes on a GPU (Kokkos's default space is not host memory), and the
// tolerance two equivalent computations need there. On the CPU both paths call the same BLAS with the
// same blocking, so they agree to rounding; on a GPU cuBLAS picks its algorithm (split-k, tensor-core
// tiles) per shape and type, and nvcc contracts a*b+c into FMAs kernel by kernel, so sums are taken
// in a different order and agree to a few float ulps of the whole sum instead.
#include <Kokkos_Core.hpp>

namespace shardft {
namespace testing_util {

inline constexpr bool kComputeOnDevice =
    !Kokkos::SpaceAccessibility<Kokkos::HostSpace, Kokkos::DefaultExecutionSpace::memory_space>::accessible;

inline double host_or_device_tol(double host_tol, double device_tol) {
  return kComputeOnDevice ? device_tol : host_tol;
}

}  // namespace testing_util
}  // namespace shardft
