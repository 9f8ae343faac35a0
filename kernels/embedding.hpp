#pragma once
// Token embedding lookup.  ids [N], table [V,d]:  out[n,:] = table[ids[n],:]
// Backward (scatter-add):  dtable[ids[n],:] += dout[n,:]
#include "kernels/types.hpp"

namespace shardft {

void embedding_forward(Unmanaged1<const std::int32_t> ids, Unmanaged2<const float> table, Unmanaged2<float> out);
void embedding_backward(Unmanaged1<const std::int32_t> ids, Unmanaged2<const float> dout, Unmanaged2<float> dtable);

// Throws std::out_of_range naming the first id outside [0, vocab).
void check_token_ids(Unmanaged1<const std::int32_t> ids, int vocab);

}  // namespace shardft
