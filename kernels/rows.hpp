#pragma once
// Row gather and scatter over row-major matrices: moving whole rows by an index list.
//   gather_rows:  dst [R, c],  dst(r, :) = src(rows(r), :)           (logits at chosen positions only)
//   scatter_rows: dst [M, c],  dst(dest(n), :) = src(n, :), dest(n) < 0 skips row n
//                 (the KV cache's append: a token's key or value goes to its row's slot at its position)
// One team per row, its threads over the columns (coalesced on a GPU).
#include "kernels/bf16.hpp"
#include "kernels/types.hpp"

namespace shardft {

void gather_rows(Unmanaged2<const float> src, Unmanaged1<const std::int32_t> rows, Unmanaged2<float> dst);
// The same from bf16 rows, widened to fp32 (exact): an embedding lookup in a bf16 table.
void gather_rows(Unmanaged2<const bf16> src, Unmanaged1<const std::int32_t> rows, Unmanaged2<float> dst);

void scatter_rows(Unmanaged2<const float> src, Unmanaged1<const std::int64_t> dest, Unmanaged2<float> dst);

// The second stage of a deterministic column sum (the gradient of a vector broadcast over rows: a bias,
// a norm weight), after teams have summed blocks of rows into partial [B, c]:
//   out[j] += sum_b partial[b, j]     (overwrite: out[j] = sum_b partial[b, j], out's old values unread)
// in a fixed order: b = 0, 1, ... on the host; on a GPU, interleaved slices of b summed in order, then
// the slices in order (rows.cpp). Deterministic either way.
void add_column_sums(Unmanaged2<const float> partial, Unmanaged1<float> out, bool overwrite = false);

}  // namespace shardft
