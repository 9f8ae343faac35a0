#pragma once
// Softmax cross-entropy with ignore_index -100.
//   logits [N,V], targets [N]:  loss_n = logsumexp_v(logits[n,:]) - logits[n, targets[n]]
//   loss_sum = sum over n with targets[n] != -100;  count = number of such n
// Backward (written over the logits when grad_scale is given):
//   dlogits[n,v] = grad_scale * (softmax(logits[n,:])[v] - [v == targets[n]]),  0 on ignored rows
#include "kernels/bf16.hpp"
#include "kernels/types.hpp"

namespace shardft {

struct CrossEntropySums {
  double loss_sum = 0.0;
  std::int64_t count = 0;
};

// Device-resident forms (a training step's): the loss sum of these rows is ADDED into loss_sum(0), a
// device scalar, and nothing is read back. Deterministic: the rows' sum is a reduction, then one add.
void cross_entropy_forward(Unmanaged2<const float> logits, Unmanaged1<const std::int32_t> targets,
                           Unmanaged1<double> loss_sum);
void cross_entropy_forward_backward(Unmanaged2<float> logits, Unmanaged1<const std::int32_t> targets,
                                    float grad_scale, Unmanaged1<double> loss_sum);
// The same on bf16 logits (a bf16 step's LM head output, as autocast hands it to the loss): read into
// fp32, the math in fp32, the gradient written over them rounded to bf16 (what the head's backward GEMMs
// read).
void cross_entropy_forward(Unmanaged2<const bf16> logits, Unmanaged1<const std::int32_t> targets,
                           Unmanaged1<double> loss_sum);
void cross_entropy_forward_backward(Unmanaged2<bf16> logits, Unmanaged1<const std::int32_t> targets,
                                    float grad_scale, Unmanaged1<double> loss_sum);

// Host-returning forms (evaluation, tests): the same, then the sums are read back (a host sync each,
// counted in kernels/device_traffic.hpp).
// Loss only; logits unchanged.
CrossEntropySums cross_entropy_forward(Unmanaged2<const float> logits, Unmanaged1<const std::int32_t> targets);

// Loss, then the logits buffer is overwritten by its gradient times grad_scale (saves a [N,V] buffer).
CrossEntropySums cross_entropy_forward_backward(Unmanaged2<float> logits, Unmanaged1<const std::int32_t> targets,
                                                float grad_scale);

// The number of targets other than -100, read back to the host (a host sync).
std::int64_t cross_entropy_target_count(Unmanaged1<const std::int32_t> targets);

}  // namespace shardft
