#pragma once
// Agreement on errors before acting on them: when one rank finds a damaged checkpoint file or fails to
// write its shard, every rank must take the same branch (fall back, stop, clean up), or the others would
// wait in the next collective forever.
#include <string>

#include "comm/communicator.hpp"

namespace shardft {

// Collective over `world` (host buffers: an MPI communicator). The first non-empty `mine` by rank,
// prefixed "rank R: " when the world has more than one rank; "" when every rank passed "".
std::string first_error(Communicator& world, const std::string& mine);

// Collective: rank `root`'s `text` on every rank.
std::string broadcast_text(Communicator& world, const std::string& text, int root);

}  // namespace shardft
