// The CPU BLAS core rule (kernels/blas_core.hpp): a generic fallback that the CPU outruns is replaced by
// the best core for its instruction set; a core as good, or one the rule does not know, is left alone;
// the user's OPENBLAS_CORETYPE and SHARDFT_BLAS_CORE=off keep the library's choice.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels/blas_core.hpp"

namespace shardft {
namespace {

CpuFeatures avx512_intel() {
  CpuFeatures f;
  f.intel = f.avx = f.avx2 = f.fma = true;
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = true;
  return f;
}

CpuFeatures avx2_of(bool amd) {
  CpuFeatures f;
  f.intel = !amd;
  f.amd = amd;
  f.avx = f.avx2 = f.fma = true;
  return f;
}

TEST(BlasCore, AGenericFallbackGivesWayToTheCoreTheCpuRunsBest) {
  EXPECT_EQ(better_blas_core("Prescott", avx512_intel()), "SkylakeX");
  EXPECT_EQ(better_blas_core("prescott", avx512_intel()), "SkylakeX") << "names compare without case";
  EXPECT_EQ(better_blas_core("Haswell", avx512_intel()), "SkylakeX");
  EXPECT_EQ(better_blas_core("Nehalem", avx2_of(false)), "Haswell");
  EXPECT_EQ(better_blas_core("Prescott", avx2_of(true)), "Zen");
  EXPECT_EQ(better_blas_core("Sandybridge", avx2_of(true)), "Zen");
  CpuFeatures avx_only;
  avx_only.avx = true;
  EXPECT_EQ(better_blas_core("Core2", avx_only), "Sandybridge");
}

TEST(BlasCore, AsGoodAChoiceOrAnUnknownCoreIsLeftAlone) {
  EXPECT_EQ(better_blas_core("SkylakeX", avx512_intel()), "");
  EXPECT_EQ(better_blas_core("Cooperlake", avx512_intel()), "") << "as good for sgemm";
  EXPECT_EQ(better_blas_core("SapphireRapids", avx512_intel()), "");
  EXPECT_EQ(better_blas_core("Zen", avx2_of(true)), "");
  EXPECT_EQ(better_blas_core("Haswell", avx2_of(false)), "");
  EXPECT_EQ(better_blas_core("NeoverseN1", avx512_intel()), "") << "a core the rule does not know";
  EXPECT_EQ(better_blas_core("", avx512_intel()), "") << "not OpenBLAS";
  CpuFeatures avx512_no_bw = avx512_intel();
  avx512_no_bw.avx512bw = false;  // Knights Landing-like: SkylakeX kernels need BW, VL and DQ
  EXPECT_EQ(better_blas_core("Prescott", avx512_no_bw), "Haswell");
  EXPECT_EQ(better_blas_core("Prescott", CpuFeatures{}), "") << "nothing better than SSE to offer";
}

TEST(BlasCore, TheUsersVariableAndOffKeepTheLibrarysChoice) {
  if (blas_core_name().empty()) GTEST_SKIP() << "this build's BLAS is not OpenBLAS: no core to choose";
  struct Restore {
    ~Restore() {
      unsetenv("OPENBLAS_CORETYPE");
      unsetenv("SHARDFT_BLAS_CORE");
    }
  } restore;
  // A core other than the library's own choice (on a CPU this OpenBLAS does not know, it chose Prescott).
  const std::string other = blas_core_name() == "Prescott" ? "Haswell" : "Prescott";
  setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  setenv("SHARDFT_BLAS_CORE", other.c_str(), 1);
  EXPECT_EQ(blas_core_to_force(), "") << "the user's OPENBLAS_CORETYPE wins";
  EXPECT_NE(describe_blas_core().find("OPENBLAS_CORETYPE=Haswell from the environment"), std::string::npos);
  unsetenv("OPENBLAS_CORETYPE");
  EXPECT_EQ(blas_core_to_force(), other) << "a core asked for by name";
  setenv("SHARDFT_BLAS_CORE", blas_core_name().c_str(), 1);
  EXPECT_EQ(blas_core_to_force(), "") << "the core it runs already";
  setenv("SHARDFT_BLAS_CORE", "off", 1);
  EXPECT_EQ(blas_core_to_force(), "");
  unsetenv("SHARDFT_BLAS_CORE");
  EXPECT_EQ(blas_core_to_force(), better_blas_core(blas_core_name(), host_cpu_features()));
  EXPECT_NE(describe_blas_core().find("OpenBLAS core " + blas_core_name()), std::string::npos);
}

}  // namespace
}  // namespace shardft
