// The NCCL backend: the same collectives as the MPI backend, on device buffers. Built wherever CUDA
// and NCCL are found; it needs one GPU per rank to run and says so when there is none.
#include <gtest/gtest.h>

#ifdef SHARDFT_HAVE_NCCL
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "comm/nccl/nccl_communicator.hpp"
#include "kernels/cuda/cublas_gemm.hpp"
#include "kernels/device_traffic.hpp"

namespace shardft {
namespace {

// Selects this rank's GPU; or, when some rank of `world` has none, says so (NCCL needs one GPU per rank).
std::string select_gpu_or_why_not(MpiCommunicator& world) {
  const int gpus = cuda_device_count();
  int enough = gpus >= 1 ? 1 : 0;
  world.all_reduce(&enough, &enough, 1, DType::i32, ReduceOp::sum);
  if (enough < world.size()) {
    return "no GPU for every rank (" + std::to_string(gpus) + " visible here): NCCL collectives need one GPU per rank";
  }
  cudaSetDevice(world.rank() % gpus);
  return "";
}

TEST(CommNccl, AllReduceReduceScatterAllGatherOnDevice) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  const std::string no_gpu = select_gpu_or_why_not(world);
  if (!no_gpu.empty()) GTEST_SKIP() << no_gpu;
  NcclCommunicator nccl(world, "world");
  const int n = nccl.size(), r = nccl.rank(), k = 4;
  std::vector<float> host(n * k);
  for (int i = 0; i < n * k; ++i) host[i] = float(i + r);
  float* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, sizeof(float) * n * k), cudaSuccess);
  cudaMemcpy(dev, host.data(), sizeof(float) * n * k, cudaMemcpyHostToDevice);
  nccl.all_reduce(dev, dev, n * k, DType::f32, ReduceOp::sum);
  cudaMemcpy(host.data(), dev, sizeof(float) * n * k, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n * k; ++i) EXPECT_FLOAT_EQ(host[i], float(n * i + n * (n - 1) / 2));
  nccl.reduce_scatter(dev, dev, k, DType::f32, ReduceOp::sum);
  nccl.all_gather(dev + r * k, dev, k, DType::f32);
  cudaMemcpy(host.data(), dev, sizeof(float) * n * k, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n * k; ++i) EXPECT_FLOAT_EQ(host[i], float(n * (n * i + n * (n - 1) / 2)));
  EXPECT_GT(nccl.ledger().total(), n > 1 ? 0.0 : -1.0);
  cudaFree(dev);
}

// Deferred waits (a training step's): wait() orders the compute stream behind the collective without
// the host waiting; synchronize() is the one host wait, and work on the compute stream sees the result.
TEST(CommNccl, DeferredWaitsOrderTheComputeStreamAndWaitOnceAtSynchronize) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  const std::string no_gpu = select_gpu_or_why_not(world);
  if (!no_gpu.empty()) GTEST_SKIP() << no_gpu;
  NcclCommunicator nccl(world, "world");
  const int n = nccl.size(), k = 1 << 20;
  std::vector<float> host(k, 1.f);
  float* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, sizeof(float) * k), cudaSuccess);
  cudaMemcpy(dev, host.data(), sizeof(float) * k, cudaMemcpyHostToDevice);
  nccl.set_deferred_waits(true);
  const DeviceTraffic before = device_traffic();
  for (int i = 0; i < 3; ++i) nccl.iall_reduce(dev, dev, k, DType::f32, ReduceOp::sum)->wait();
  EXPECT_EQ(device_traffic().since(before).syncs, 0) << device_traffic().since(before).describe();
  std::vector<float> out(k, 0.f);
  cudaMemcpyAsync(out.data(), dev, sizeof(float) * k, cudaMemcpyDeviceToHost, cuda::compute_stream());
  nccl.synchronize();
  EXPECT_EQ(device_traffic().since(before).syncs, 1);
  cudaStreamSynchronize(cuda::compute_stream());
  const float expected = float(n) * float(n) * float(n);
  EXPECT_FLOAT_EQ(out[0], expected);
  EXPECT_FLOAT_EQ(out[k - 1], expected);
  nccl.set_deferred_waits(false);
  cudaFree(dev);
}

}  // namespace
}  // namespace shardft
#endif
