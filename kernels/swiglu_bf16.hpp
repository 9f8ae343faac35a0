#pragma once
// SwiGLU on the fused MLP's packed layout (kernels/swiglu.hpp) with bf16 activations, as a bf16 step
// keeps them: gu [N, 2I] = [g | u] is the gate/up GEMM's bf16 output, s [N, I] the down projection's bf16
// input, and backward writes [dg | du] in bf16 over gu, as the gate/up layer's backward GEMMs read it. The math
// runs in fp32 registers, with the same expressions as the fp32 kernels, and each output is rounded once,
// so the values equal the fp32 kernels' outputs rounded to bf16.
//   forward:   s = silu(g) * u = g / (1 + exp(-g)) * u
//   backward:  du = ds * g * sig(g);  dg = ds * u * sig(g) * (1 + g * (1 - sig(g)))
// Where the host has AVX-512 BF16, both these and the fp32 kernels run kernels/avx512_swiglu.hpp's rows
// (silu = g sig there, one division), which keeps the bf16 values the fp32 ones rounded once.
// One thread per pack of 8 consecutive columns of s (16-byte loads and stores, kernels/bf16_pack.hpp;
// one column where rows are not 16-byte aligned), so neighbouring threads touch neighbouring columns of
// each half.
#include "kernels/bf16.hpp"
#include "kernels/types.hpp"

namespace shardft {

void swiglu_forward_packed_bf16(Unmanaged2<const bf16> gu, Unmanaged2<bf16> s);
// In place: gu [N, 2I] holds [g | u] and becomes [dg | du]. ds [N, I] is the down projection's input
// gradient (bf16, as autocast hands it back). s receives forward's s again, computed by the same
// expression from the same bf16 inputs (the same bits), for the down projection's weight gradient: forward
// need not keep s, and its I columns per token cost one extra write here instead of a buffer per layer.
// s may be ds's own buffer: each pack of ds is read before s's pack is written over it, by the same thread.
void swiglu_backward_packed_bf16(Unmanaged2<bf16> gu, Unmanaged2<const bf16> ds, Unmanaged2<bf16> s);

}  // namespace shardft
