#pragma once
// The sample ids a tile of packed rows spans, for the host attention kernels that skip a tile pair whose
// samples differ and mask only the tiles that need it (kernels/attention_lse_tiled.cpp,
// kernels/cpu/amx_attention_bf16.cpp).
#include <algorithm>
#include <cstdint>

namespace shardft {

struct SeqRange {
  std::int32_t lo, hi;
};
// The smallest and largest of sid[begin .. end) (end > begin).
inline SeqRange seq_range(const std::int32_t* sid, int begin, int end) {
  SeqRange r{sid[begin], sid[begin]};
  for (int i = begin + 1; i < end; ++i) {
    r.lo = std::min(r.lo, sid[i]);
    r.hi = std::max(r.hi, sid[i]);
  }
  return r;
}
// No sample in common: no key of one tile is visible from any query of the other.
inline bool disjoint(SeqRange a, SeqRange b) { return a.hi < b.lo || b.hi < a.lo; }

}  // namespace shardft
