#pragma once
// NEFTune's noise on the input embeddings (HF's neftune_post_forward_hook), drawn from a counter-based
// hash as the dropout masks are (kernels/dropout_mask.hpp), so it needs no RNG state and a token gets the
// same noise on every parallel layout where its row key is the same:
//   h(n, c)    = mix(mix(stream ^ mix(row_key[n])) ^ c),   mix = splitmix64's finaliser
//   u(n, c)    = (h >> 40) / 2^24                            (24 uniform bits in [0, 1))
//   x[n, c]   += magnitude * (2 u(n, c) - 1)                 (uniform in [-magnitude, magnitude))
// HF's magnitude: neftune_noise_alpha / sqrt(sequence length * hidden size). Shapes: x [rows, cols],
// row_key [rows].
#include <cstdint>

#include "kernels/types.hpp"

namespace shardft {

void add_uniform_noise(Unmanaged2<float> x, float magnitude, std::uint64_t stream,
                       Unmanaged1<const std::uint64_t> row_key);

}  // namespace shardft
