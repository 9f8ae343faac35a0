// bf16: auto's device rule: bf16 tensor cores from compute capability 8.0 on; on the host, AMX tiles.
#include <gtest/gtest.h>

#include "kernels/amx_gemm_bf16.hpp"
#include "kernels/compute_device.hpp"

namespace shardft {
namespace {

TEST(ComputeDevice, Bf16TensorCoresFromAmpereOn) {
  EXPECT_FALSE(has_bf16_tensor_cores(ComputeDevice{}));
  EXPECT_FALSE(has_bf16_tensor_cores({true, "Tesla V100", 70}));
  EXPECT_TRUE(has_bf16_tensor_cores({true, "A100", 80}));
  EXPECT_TRUE(has_bf16_tensor_cores({true, "NVIDIA H100 80GB HBM3", 90}));
  EXPECT_EQ(describe_bf16_support({true, "NVIDIA H100 80GB HBM3", 90}), "NVIDIA H100 80GB HBM3 (sm_90) has bf16 tensor cores");
  EXPECT_EQ(describe_bf16_support({true, "Tesla T4", 75}), "Tesla T4 (sm_75) has no bf16 tensor cores");
  EXPECT_TRUE(bf16_runs_faster({true, "A100", 80}));
  EXPECT_FALSE(bf16_runs_faster({true, "Tesla T4", 75}));
  EXPECT_FALSE(bf16_runs_faster({false, "the host CPU", 0, false}));
  EXPECT_TRUE(bf16_runs_faster({false, "the host CPU", 0, true}));
  EXPECT_EQ(describe_bf16_support({false, "the host CPU", 0, true}),
            "the model computes on the host CPU, whose AMX tiles run the bf16 GEMMs");
  EXPECT_EQ(describe_bf16_support({false, "the host CPU", 0, false}),
            "the model computes on the host CPU, where bf16 is emulated (slower than fp32)");
  const ComputeDevice here = compute_device();  // a CPU build, or a GPU build on its device
  EXPECT_EQ(here.gpu, here.compute_capability > 0);
  EXPECT_FALSE(here.name.empty());
  EXPECT_EQ(here.amx_tiles, !here.gpu && amx::available());
}

}  // namespace
}  // namespace shardft
