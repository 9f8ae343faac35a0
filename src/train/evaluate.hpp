#pragma once
// Held-out evaluation: mean loss over the eval set's target tokens, and greedy-generation
// exact match (the generated answer, up to the template's stop token, equals the reference byte for
// byte) over the samples that end in an assistant turn (plain-text samples only count for the loss).
#include <string>
#include <vector>

#include "data/chat_template.hpp"
#include "comm/communicator.hpp"
#include "data/sft_data.hpp"
#include "model/decoder.hpp"

namespace shardft {

struct EvalResult {
  double eval_loss = 0.0;
  double exact_match = 0.0;              // over generated_samples
  std::int64_t samples = 0;
  std::int64_t generated_samples = 0;    // samples that end in an assistant turn
  std::vector<std::string> generations;  // in eval-set order ("" where nothing was generated)
};

// Greedy decoding of a batch of prompts (generate() in train/generate.hpp with temperature 0); stops
// each row at any of stop_ids, after max_new_tokens or at max_seq_length tokens. Rows are padded with pad_id.
std::vector<std::vector<std::int32_t>> greedy_generate(Decoder& model, ParamSource& params,
                                                       const std::vector<std::vector<std::int32_t>>& prompts,
                                                       int max_new_tokens, int max_seq_length,
                                                       const std::vector<std::int32_t>& stop_ids,
                                                       std::int32_t pad_id);

// `loss_on`: per conversation, which tokens the loss is over (empty: the assistant's, everywhere).
EvalResult evaluate(Decoder& model, ParamSource& params, const std::vector<Conversation>& eval_set, int batch_size,
                    int max_seq_length, int max_new_tokens, const ChatEncoder& encoder,
                    const std::vector<LossOn>& loss_on = {});

// The loss alone, over tokenized samples split among the ranks of `world`: batch b goes to rank
// b mod size, the sums are all-reduced, and every rank returns the same mean over all target tokens.
// Every rank runs the same number of forward passes (one without a batch of its own repeats the first
// and drops the result), as stage 3's collective gathers need. Collective over `world`.
struct LossEval {
  double eval_loss = 0.0;
  std::int64_t samples = 0, targets = 0;
};
LossEval evaluate_loss(Decoder& model, ParamSource& params, const std::vector<TokenizedSample>& samples,
                       int batch_size, std::int32_t pad_id, Communicator& world);

}  // namespace shardft
