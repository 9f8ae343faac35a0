// MFU's table of GPU peaks: device names as cudaGetDeviceProperties reports them, the dense bf16
// tensor-core and fp32 figures of the datasheets, 0 for what the table does not know. Needs no GPU.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <string>

#include "train/mfu.hpp"

namespace shardft {
namespace {

struct Row {
  const char* name;
  double bf16, fp32;
};

TEST(MfuGpuPeak, KnownDeviceNamesGiveTheirDatasheetPeaks) {
  const Row rows[] = {
      {"NVIDIA H100 80GB HBM3", 989, 67},  // H100 SXM5
      {"NVIDIA H100 PCIe", 756, 51},
      {"NVIDIA H200", 989, 67},  // H200 SXM
      {"NVIDIA A100-SXM4-80GB", 312, 19.5},
      {"NVIDIA A100-SXM4-40GB", 312, 19.5},
      {"NVIDIA A100-PCIE-40GB", 312, 19.5},
      {"NVIDIA A100 80GB PCIe", 312, 19.5},
      {"NVIDIA L40S", 362, 91.6},
      {"NVIDIA L40", 181, 90.5},
      {"NVIDIA L4", 121, 30.3},
      {"NVIDIA A10", 125, 31.2},
      {"Tesla V100-SXM2-16GB", 0, 15.7},  // no bf16 tensor cores on Volta
      {"Tesla V100-PCIE-32GB", 0, 14},
      {"NVIDIA GeForce RTX 4090", 165.2, 82.6},
  };
  for (const Row& r : rows) {
    EXPECT_DOUBLE_EQ(known_gpu_peak_tflops(r.name, true), r.bf16) << r.name;
    EXPECT_DOUBLE_EQ(known_gpu_peak_tflops(r.name, false), r.fp32) << r.name;
  }
}

TEST(MfuGpuPeak, MatchingIsByWholeTokensAndIgnoresCase) {
  // "A10" is a token of "NVIDIA A10", not a prefix match of A100 or A10G; L4 is not L40 or L40S.
  EXPECT_DOUBLE_EQ(known_gpu_peak_tflops("NVIDIA A10", true), 125);
  EXPECT_DOUBLE_EQ(known_gpu_peak_tflops("NVIDIA A100-SXM4-80GB", true), 312);
  EXPECT_DOUBLE_EQ(known_gpu_peak_tflops("NVIDIA A10G", true), 0);
  EXPECT_DOUBLE_EQ(known_gpu_peak_tflops("NVIDIA L4", false), 30.3);
  EXPECT_DOUBLE_EQ(known_gpu_peak_tflops("nvidia h100 80gb hbm3", true), 989);
}

TEST(MfuGpuPeak, UnknownOrUncheckedDevicesGiveZero) {
  for (const char* name : {"", "NVIDIA GeForce GTX 1080", "NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA GH200 480GB",
                           "NVIDIA B200", "NVIDIA GeForce RTX 4090 D", "NVIDIA A100-SXM4-40GB MIG 1g.5gb",
                           "AMD Instinct MI300X"}) {
    EXPECT_DOUBLE_EQ(known_gpu_peak_tflops(name, true), 0) << name;
    EXPECT_DOUBLE_EQ(known_gpu_peak_tflops(name, false), 0) << name;
  }
}

TEST(MfuGpuPeak, ResolvedPeakSaysWhereItCameFrom) {
  const PeakFlops given = resolve_peak_flops(2.5, true);
  EXPECT_DOUBLE_EQ(given.flops, 2.5e12);
  EXPECT_EQ(given.basis, "peak_tflops");
#if !defined(KOKKOS_ENABLE_CUDA)
  // The model runs on the host (no CUDA Kokkos), with or without a GPU in the machine: the BLAS rate.
  const PeakFlops measured = resolve_peak_flops(0, false);
  EXPECT_GT(measured.flops, 1e8);
  EXPECT_EQ(measured.basis.rfind("measured fp32 GEMM rate", 0), 0u) << measured.basis;
#endif
}

}  // namespace
}  // namespace shardft
