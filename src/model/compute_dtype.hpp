#pragma once
// Weights rounded to the run's compute dtype (config/compute_dtype.hpp).
#include "config/compute_dtype.hpp"
#include "kernels/types.hpp"

namespace shardft {

// Weights held in fp32 buffers for a model without the engine (evaluation, generation), rounded in place
// to the compute dtype as the engine's compute weights are.
void round_to_compute_dtype(ComputeDtype dtype, View1<float> weights);

}  // namespace shardft
