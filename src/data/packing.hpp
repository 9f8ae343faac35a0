#pragma once
// Packing (trl's `packing: true`): tokenized samples are placed back to back in rows of at most
// max_seq_length tokens by first-fit- or best-fit-decreasing bin packing, so little compute goes to padding.
// Inside a row every sample keeps its own positions (restarting at 0) and its own seq_id, which the
// attention uses so that no token ever sees another sample; targets never cross a boundary.
#include <cstdint>
#include <string>
#include <vector>

#include "data/sft_data.hpp"

namespace shardft {

// Rows of sample indices. Longest samples first, each into the first row with room for it; a
// sample longer than max_len gets a row of its own (it was truncated to max_len already).
std::vector<std::vector<std::int64_t>> pack_first_fit_decreasing(const std::vector<TokenizedSample>& samples,
                                                                 int max_len);

// Best-fit decreasing (trl's packing_strategy bfd): longest samples first, each into the open row with
// the least room that still fits it (the earliest such row on a tie), else a new row.
std::vector<std::vector<std::int64_t>> pack_best_fit_decreasing(const std::vector<TokenizedSample>& samples,
                                                                int max_len);

// The recipe's packing_strategy: ffd (shardft's default) or bfd.
std::vector<std::vector<std::int64_t>> pack_samples(const std::vector<TokenizedSample>& samples, int max_len,
                                                    const std::string& strategy);

// Row r of the batch holds the samples rows[r] in order, then padding (pad_id) to the longest row.
TokenBatch collate_packed(const std::vector<TokenizedSample>& samples,
                          const std::vector<std::vector<std::int64_t>>& rows,
                          std::int32_t pad_id = ByteTokenizer::kPad);

// Fraction of the tokens in the rows that are real (not padding) when every row is max_len long.
double packing_efficiency(const std::vector<TokenizedSample>& samples,
                          const std::vector<std::vector<std::int64_t>>& rows, int max_len);

}  // namespace shardft
