#include "model/compute_dtype.hpp"

#include "kernels/elementwise.hpp"
#include "kernels/fp16.hpp"

namespace shardft {

void round_to_compute_dtype(ComputeDtype dtype, View1<float> weights) {
  if (dtype == ComputeDtype::bf16) round_to_bf16(weights, weights);
  if (dtype == ComputeDtype::fp16) round_to_fp16(weights, weights);
}

}  // namespace shardft
