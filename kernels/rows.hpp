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
// The same from bf16 rows into bf16 rows, copied as they are: an embedding lookup into a bf16 stream.
void gather_rows(Unmanaged2<const bf16> src, Unmanaged1<const std::int32_t> rows, Unmanaged2<bf16> dst);

void scatter_rows(Unmanaged2<const float> src, Unmanaged1<const std::int64_t> dest, Unmanaged2<float> dst);

}  // namespace shardft
