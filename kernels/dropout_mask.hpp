#pragma once
// Dropout masks drawn from a counter-based hash: each element's keep/drop is a pure function of its
// coordinates, so the mask needs no stored state or RNG stream. Forward, backward and checkpointing's
// recompute draw the same mask, and it is the same however the tokens are split over ranks and
// micro-batches as long as each token's row key is.
//
//   mix(z)       = splitmix64's finaliser of z + 0x9e3779b97f4a7c15
//   stream       = mix(mix(mix(seed) ^ step) ^ (layer << 8 | module))          (dropout_stream)
//   h(n, c)      = mix(mix(stream ^ mix(row_key[n])) ^ c)
//   keep(n, c)   = (h >> 40) >= round(p * 2^24)      (24 uniform bits against the drop threshold)
//   out[n, c]    = beta * out[n, c] + (keep(n, c) ? x[n, c] / (1 - p) : 0)     (inverted dropout, as
//                  torch.nn.Dropout: kept values scaled so the expectation is x)
// Shapes: x, out [rows, cols]; row_key [rows].
#include <cstdint>

#include "kernels/bf16.hpp"
#include "kernels/types.hpp"

namespace shardft {

struct DropoutMask {
  float p = 0.f;                            // drop probability in [0, 1); 0: off
  std::uint64_t stream = 0;                 // dropout_stream(...)
  Unmanaged1<const std::uint64_t> row_key;  // one per row
  bool on() const { return p > 0.f; }
};

std::uint64_t dropout_stream(std::uint64_t seed, std::int64_t step, int layer, int module);

// Row keys of tokens that belong to dataset samples: (sample_id << 32) | position. A token's key is then
// the same on every parallel layout.
void dropout_row_keys(Unmanaged1<const std::int32_t> sample_ids, Unmanaged1<const std::int32_t> position_ids,
                      Unmanaged1<std::uint64_t> row_key);
// Row keys when the samples are not known: 2^63 | (call << 32) | flat row index. Deterministic but tied to
// how the batch was split.
void dropout_row_keys_flat(std::int64_t call, Unmanaged1<std::uint64_t> row_key);

// out = beta * out + mask(x) as above; out may be x's own buffer (beta 0).
void dropout_apply(const DropoutMask& m, Unmanaged2<const float> x, Unmanaged2<float> out, float beta);
// The same written in bf16, the fp32 value rounded once (a bf16 step: dropout's output as autocast hands
// it on, and LoRA's share of a bf16 input gradient added into it with beta 1); x bf16 (widened exactly)
// or fp32.
void dropout_apply(const DropoutMask& m, Unmanaged2<const bf16> x, Unmanaged2<bf16> out, float beta = 0.f);
void dropout_apply(const DropoutMask& m, Unmanaged2<const float> x, Unmanaged2<bf16> out, float beta);

// The keep decisions themselves (1 kept, 0 dropped), [rows, cols]: tests.
void dropout_keep(const DropoutMask& m, Unmanaged2<float> keep);

}  // namespace shardft
