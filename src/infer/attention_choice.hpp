#pragma once
// Which attention kernel a run uses, from attn_implementation (HF's key) and the compute dtype:
//   eager             the reference kernel, keeping the [seq, seq] probabilities for backward
//   memory_efficient  the log-sum-exp kernels (kernels/attention_lse.hpp): on the CPU fused on AVX-512 FMAs
//                     (fp32) or AMX tiles (bf16) where they fit, else sgemm tiles; the Kokkos flash kernel
//                     on a GPU. The description names the one this head_dim runs (when it is given).
//   sdpa, flash_attention_2, auto (the default)
//                     the fused bf16 kernels (kernels/attention_fused.hpp: cuDNN's SDPA) where they are
//                     built, the compute dtype is bf16 and their start-up self-test passes; memory_efficient
//                     otherwise. The reason is part of the description the run logs.
// deterministic (deterministic_attention): false takes cuDNN's faster backward with atomic dq where the
// fused kernels run and that backward passes its own self-test; the description says which backward runs.
#include <string>

#include "model/decoder.hpp"

namespace shardft {

struct AttentionChoice {
  bool memory_efficient = false, fused = false;
  bool fused_column_blocks = false;  // the fused kernels read q, k, v as column blocks (their own self-test)
  bool deterministic_backward = true;  // the fused kernels' backward (AttentionShape::deterministic_backward)
  std::string description;  // "fused bf16 kernels: cuDNN 9.19.0 SDPA (self-test passed)", ...
};

// The self-test runs once per process, the first time a choice could use the fused kernels.
AttentionChoice choose_attention(const std::string& attn_implementation, ComputeDtype dtype,
                                 bool deterministic = true, int head_dim = 0);
// Sets the decoder's attention as choose_attention decides; returns the choice.
AttentionChoice configure_attention(Decoder& model, const std::string& attn_implementation, bool deterministic = true);

}  // namespace shardft
