#pragma once
// AdamW with decoupled weight decay (Loshchilov & Hutter), PyTorch's formulation, on flat fp32 buffers.
// At step t (1-based):
//   p <- p * (1 - lr * wd)
//   m <- b1 m + (1 - b1) g,    v <- b2 v + (1 - b2) g^2
//   p <- p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
#include <vector>

#include "kernels/flat_runs.hpp"
#include "kernels/runs_cast.hpp"
#include "kernels/types.hpp"

namespace shardft {

struct AdamWHyper {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.f;
  long step = 1;
};

void adamw_update(const AdamWHyper& h, Unmanaged1<float> param, Unmanaged1<const float> grad, Unmanaged1<float> m,
                  Unmanaged1<float> v);

// The whole optimizer shard in ONE launch: `runs` (kernels/flat_runs.hpp) holds the parameters' pieces,
// value 1 where the piece takes weight decay (h.weight_decay) and 0 where it takes none (norms, biases);
// elements in no run (padding) are not touched. Each element gets exactly adamw_update's arithmetic with
// its run's weight decay, so the result equals one adamw_update per run bit for bit.
// grad_scale: empty, or a device scalar the gradient is multiplied by as it is read (the clip factor
// of clip_factor, elementwise.hpp): g = grad * grad_scale(0), the same float product clip_to_norm
// stores, so the update equals clip_to_norm then adamw_update bit for bit, without the clipping pass.
void adamw_update_runs(const AdamWHyper& h, const FlatRuns& runs, Unmanaged1<float> param,
                       Unmanaged1<const float> grad, Unmanaged1<float> m, Unmanaged1<float> v,
                       Unmanaged1<const float> grad_scale = {});
// The same launched on `space` (kernels/side_queue: the optimizer's own queue).
void adamw_update_runs(const ExecSpace& space, const AdamWHyper& h, const FlatRuns& runs, Unmanaged1<float> param,
                       Unmanaged1<const float> grad, Unmanaged1<float> m, Unmanaged1<float> v,
                       Unmanaged1<const float> grad_scale);

// The compute weights the ZeRO engine refreshes from the master weights after each update
// (kernels/runs_cast.hpp): bf16 storage, or fp32 storage with a RunCast.
struct ComputeWeights {
  Unmanaged1<bf16> bf16_storage;
  Unmanaged1<float> f32_storage;
  RunCast cast = RunCast::copy;
};

// The same update, and in the same pass every updated element written to its compute weight: the
// refresh (cast_runs over the same elements) fused into the update, so the step reads the master
// weights once instead of twice and launches once. `runs` come from adamw_copy_runs: each holds the weight
// decay flag and the offset of the compute copy. The results equal adamw_update_runs then cast_runs bit
// for bit (the same element expressions).
void adamw_update_runs(const AdamWHyper& h, const FlatRuns& runs, Unmanaged1<float> param,
                       Unmanaged1<const float> grad, Unmanaged1<float> m, Unmanaged1<float> v,
                       Unmanaged1<const float> grad_scale, const ComputeWeights& copy);
void adamw_update_runs(const ExecSpace& space, const AdamWHyper& h, const FlatRuns& runs, Unmanaged1<float> param,
                       Unmanaged1<const float> grad, Unmanaged1<float> m, Unmanaged1<float> v,
                       Unmanaged1<const float> grad_scale, const ComputeWeights& copy);

// The run table of that fused update: every piece of `decay` (value 1: takes weight decay, 0: none) cut
// where `copy` (value: the offset from the master weights to the compute weights, >= 0) changes, each
// piece's value the pair packed as 2 * offset + decay. Throws std::invalid_argument when a piece of
// `decay` lies outside `copy` (it would be updated without a copy) or an offset is negative.
std::vector<FlatRun> adamw_copy_runs(const std::vector<FlatRun>& decay, const std::vector<FlatRun>& copy);

}  // namespace shardft
