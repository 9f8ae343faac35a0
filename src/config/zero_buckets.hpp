#pragma once
// DeepSpeed's communication bucket sizes as recipe keys (reduce_bucket_size, allgather_bucket_size).
// Both count elements, as DeepSpeed defines them, and accept "auto". The ZeRO engine uses them
// (parallel/grad_buckets.hpp): consecutive units' gradients are coalesced into reduce_bucket_size
// buckets, each reduce-scattered without blocking while backward goes on; allgather_bucket_size bounds
// the weight gathers in flight at stages 1-2 and, when set explicitly, stage 3's prefetch window
// ("auto" there prefetches the next block only: DeepSpeed's 5e8 would gather a small model whole).
#include <cstdint>
#include <string>

#include "config/train_config.hpp"

namespace shardft {

// "auto", or a whole number of elements >= 1 written as an integer or in DeepSpeed's float style
// ("5e8", "200000000.0") -> "auto" or the integer's digits. Throws std::invalid_argument with the reason.
std::string canonical_bucket_size_text(const std::string& text);

// reduce_bucket_size in elements; "auto" is hidden_size * hidden_size (what HF's Trainer fills in).
std::int64_t resolved_reduce_bucket_size(const TrainConfig& cfg);
// allgather_bucket_size in elements; "auto" is 500000000, DeepSpeed's own default.
std::int64_t resolved_allgather_bucket_size(const TrainConfig& cfg);

}  // namespace shardft
