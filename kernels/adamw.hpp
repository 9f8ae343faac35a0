#pragma once
// AdamW with decoupled weight decay (Loshchilov & Hutter), PyTorch's formulation, on flat fp32 buffers.
// At step t (1-based):
//   p <- p * (1 - lr * wd)
//   m <- b1 m + (1 - b1) g,    v <- b2 v + (1 - b2) g^2
//   p <- p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
#include "kernels/types.hpp"

namespace shardft {

struct AdamWHyper {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.f;
  long step = 1;
};

void adamw_update(const AdamWHyper& h, Unmanaged1<float> param, Unmanaged1<const float> grad, Unmanaged1<float> m,
                  Unmanaged1<float> v);

}  // namespace shardft
