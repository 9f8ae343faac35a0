#pragma once
// Memory sizes in recipes (max_memory_per_rank): "16GB", "12GiB", "512MB", "1.5e9". As accelerate's
// max_memory reads them: KB / MB / GB / TB are powers of 1000, KiB / MiB / GiB / TiB powers of 1024,
// a bare number (or "B") is bytes.
#include <string>


namespace shardft {

// Bytes of a size; throws std::invalid_argument naming what was expected.
double parse_memory_size(const std::string& text);

// "auto", "none", or a size -> "auto", "none" or the size as written (validated). Throws
// std::invalid_argument with the reason.
std::string canonical_memory_size_text(const std::string& text);

// max_shard_size: a size of at least one byte, as written (validated). Throws std::invalid_argument.
std::string canonical_shard_size_text(const std::string& text);

// max_memory_per_rank: < 0 for auto, 0 for none, else bytes.
double memory_limit_bytes(const std::string& max_memory_per_rank);

}  // namespace shardft
