#pragma once
// Token embedding lookup.  ids [N], table [V,d]:  out[n,:] = table[ids[n],:]
// Backward (scatter-add):  dtable[ids[n],:] += dout[n,:]   (deterministic: no float atomics)
// Both take ids in [0, V) as given: batches are checked once, on the host, where they are built
// (check_token_ids below), so that a step never copies ids back to the host.
#include <cstddef>

#include "kernels/types.hpp"

namespace shardft {

void embedding_forward(Unmanaged1<const std::int32_t> ids, Unmanaged2<const float> table, Unmanaged2<float> out);
void embedding_backward(Unmanaged1<const std::int32_t> ids, Unmanaged2<const float> dout, Unmanaged2<float> dtable);

// The grouping embedding_backward sums by: token positions ordered by id, ties in position order (a stable
// radix sort on the device).  ids [N] in [0, vocab):  sorted_ids [N] ascending, positions [N] with
// sorted_ids[k] = ids[positions[k]].
void sort_tokens_by_id(Unmanaged1<const std::int32_t> ids, int vocab, Unmanaged1<std::int32_t> sorted_ids,
                       Unmanaged1<std::int32_t> positions);

// Throws std::out_of_range naming the first id outside [0, vocab), its position and the vocabulary size.
void check_token_ids(const std::int32_t* host_ids, std::size_t n, int vocab);
// The same for ids already in the compute memory space: copies them to the host first, a synchronisation
// a step must not pay (check the host vector the batch was built from instead).
void check_token_ids(Unmanaged1<const std::int32_t> ids, int vocab);

}  // namespace shardft
