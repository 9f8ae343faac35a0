#pragma once
// DeepSpeed's communication bucket sizes as recipe keys (reduce_bucket_size, allgather_bucket_size).
// Both count elements, as DeepSpeed defines them, and accept "auto". shardft does not bucket yet:
// gradients are reduced, and weights gathered, one layer block (one flat unit) at a time. The keys
// exist so that DeepSpeed configs carry their values over and bucketing can use them when it lands.
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
