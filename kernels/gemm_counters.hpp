#pragma once
// What a run's GEMMs do, counted by the path a GPU build takes for their operand dtypes, on every
// backend: a CPU build widens bf16 tiles into sgemm whatever the dtypes, but the same calls with the same
// operands reach these counters, so a CPU run reports what a GPU would run.
//   both operands bf16  -> tensor cores (cuBLAS bf16 x bf16, fp32 accumulate)
//   both fp32           -> an fp32 GEMM (fp32 compute; in a bf16 run, a place autocast would not be)
//   one bf16, one fp32  -> the bf16 operand widened into an fp32 copy on the device, then an fp32 GEMM
// FLOPs are 2 m n k per product. The tiled host attention's sgemm tiles (kernels/gemm.hpp gemm_ld) are
// attention, not model GEMMs, and are not counted here.
#include <cstdint>

namespace shardft {

struct GemmCounters {
  double tensor_core_flops = 0, fp32_flops = 0, mixed_flops = 0;
  std::int64_t widened_elements = 0;  // bf16 elements the GPU path copies to fp32 for mixed GEMMs
  std::int64_t calls = 0;             // GEMMs (each one vendor launch on a GPU; a mixed one adds a widening)

  GemmCounters since(const GemmCounters& earlier) const;
  double total_flops() const { return tensor_core_flops + fp32_flops + mixed_flops; }
  // Share of the FLOPs on the tensor-core path, 0 when there were none.
  double tensor_core_share() const;
};

// The counts since the process started (host thread only, like kernel launches).
GemmCounters gemm_counters();
// One product op(A)[m,k] op(B)[k,n] with operands of these dtypes.
void count_gemm(bool a_bf16, bool b_bf16, std::int64_t m, std::int64_t n, std::int64_t k);

}  // namespace shardft
