#pragma once
// Held-out evaluation: mean loss over the eval set's target tokens, and greedy-generation
// exact match (the generated answer, up to <|end|>, equals the reference byte for byte).
#include <string>
#include <vector>

#include "data/sft_data.hpp"
#include "model/decoder.hpp"

namespace shardft {

struct EvalResult {
  double eval_loss = 0.0;
  double exact_match = 0.0;
  std::int64_t samples = 0;
  std::vector<std::string> generations;  // in eval-set order
};

// Greedy decoding of a batch of prompts; stops each row at <|end|> or after max_new_tokens.
std::vector<std::vector<std::int32_t>> greedy_generate(Decoder& model, ParamSource& params,
                                                       const std::vector<std::vector<std::int32_t>>& prompts,
                                                       int max_new_tokens, int max_seq_length);

EvalResult evaluate(Decoder& model, ParamSource& params, const std::vector<Conversation>& eval_set, int batch_size,
                    int max_seq_length, int max_new_tokens);

}  // namespace shardft
