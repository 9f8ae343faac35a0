// bf16: auto's device rule: bf16 tensor cores from compute capability 8.0 on, never on the host.
#include <gtest/gtest.h>

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
  const ComputeDevice here = compute_device();  // a CPU build, or a GPU build on its device
  EXPECT_EQ(here.gpu, here.compute_capability > 0);
  EXPECT_FALSE(here.name.empty());
}

}  // namespace
}  // namespace shardft
