#pragma once
// A block of columns of a row-major matrix, for the products that fill only part of a packed output
// (LoRA's term on the gate half or the up half of the fused [gate | up] projection).
//   add_column_block:  dst[n, col0 + j] += src[n, j]   src [N, w], dst [N, W], col0 + w <= W
//                      (a bf16 dst: the sum in fp32, rounded once to nearest even)
//   copy_column_block: dst[n, j] = src[n, col0 + j]    src [N, W], dst [N, w]
#include <cstdint>

#include "kernels/bf16.hpp"
#include "kernels/types.hpp"

namespace shardft {

void add_column_block(Unmanaged2<const float> src, Unmanaged2<float> dst, std::int64_t col0);
void add_column_block(Unmanaged2<const float> src, Unmanaged2<bf16> dst, std::int64_t col0);  // a bf16 output's
void copy_column_block(Unmanaged2<const float> src, std::int64_t col0, Unmanaged2<float> dst);
void copy_column_block(Unmanaged2<const bf16> src, std::int64_t col0, Unmanaged2<bf16> dst);  // a bf16 gradient's

}  // namespace shardft
