#pragma once
// Byte copy between two raw buffers that each live on the host or in MemSpace (the comm layer passes
// raw pointers, and a one-rank "collective" is such a copy). The ranges may overlap (memmove's rule).
// Synchronous: the bytes are in place when it returns.
#include <cstddef>

namespace shardft {

void copy_buffer_bytes(void* dst, const void* src, std::size_t bytes);

}  // namespace shardft
