// The suite's environment reaches the test processes: CMake's test discovery once dropped all but the
// first variable of the list it was given, so the unit tests ran with OpenMP's default threads.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cstdlib>
#include <string>

namespace shardft {
namespace {

TEST(TestEnvironment, EveryVariableReachesTheTestProcess) {
  for (const char* name : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OMP_WAIT_POLICY"}) {
    EXPECT_NE(std::getenv(name), nullptr) << name << " is not set: run the tests through ctest (tests/CMakeLists.txt)";
  }
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if (omp) {
    EXPECT_EQ(std::string(omp), std::to_string(SHARDFT_TEST_OMP_THREADS));
  }
#if defined(KOKKOS_ENABLE_OPENMP)
  EXPECT_EQ(Kokkos::DefaultExecutionSpace().concurrency(), SHARDFT_TEST_OMP_THREADS);
#endif
}

}  // namespace
}  // namespace shardft
