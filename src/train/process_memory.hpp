#pragma once
// The process's own memory as the kernel counts it.
#include <cstdint>

namespace shardft {

// The peak resident set size (VmHWM of /proc/self/status) in bytes; 0 where it cannot be read.
std::int64_t peak_rss_bytes();

}  // namespace shardft
