#pragma once
// Supervised fine-tuning data: conversations read from JSONL, rendered with the chat template,
// tokenized, and collated into padded micro-batches with assistant-only targets.
// (Dataset files: data/datasets.hpp; chat templates and any tokenizer: data/chat_template.hpp.)
#include <cstdint>
#include <string>
#include <vector>

#include "io/data_error.hpp"
#include "tokenizer/byte_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace shardft {

// The role of a plain-text sample's one turn: every token takes loss (trl's `text` datasets).
inline constexpr char kTextRole[] = "text";

struct Turn {
  std::string role;     // "system" | "user" | "assistant" (trl's names; "human"/"gpt" are mapped),
                        // or kTextRole as the only turn of a plain-text sample
  std::string content;
};
using Conversation = std::vector<Turn>;

inline bool is_text_sample(const Conversation& conv) { return conv.size() == 1 && conv[0].role == kTextRole; }

// Reads a dataset file with the default options (read_dataset in data/datasets.hpp): JSONL or a JSON
// array of records in the conversations / messages / prompt-completion / text formats. Anything
// malformed throws DataError("path:line: ...").
std::vector<Conversation> read_conversations_jsonl(const std::string& path);

// One tokenized training sample. labels[t] is the token at t when it takes loss (assistant content
// and the <|end|> that closes an assistant turn), else -100. Not yet shifted.
struct TokenizedSample {
  std::vector<std::int32_t> input_ids;
  std::vector<std::int32_t> labels;
  bool truncated = false;  // the rendered conversation was longer than max_seq_length (not kept in the cache)
};

// The shardft chat template with the byte tokenizer (ChatEncoder in data/chat_template.hpp does every
// template and tokenizer): <|bos|> then for each turn <|role|> content <|end|>.
// Truncated to max_seq_length tokens.
TokenizedSample apply_chat_template(const ByteTokenizer& tok, const Conversation& conv, int max_seq_length);

// The prompt to generate from: every turn but the last (which must be the assistant's), then
// <|assistant|>; and the expected answer text.
struct GenerationPrompt {
  std::vector<std::int32_t> prompt_ids;
  std::string reference;
};
GenerationPrompt make_generation_prompt(const ByteTokenizer& tok, const Conversation& conv);

// A micro-batch on the host, row-major [batch, seq]. targets are shifted: targets[t] is the label of
// position t+1 (what the logits at t must predict), -100 at the last position and on padding.
// Padding uses the pad id given to collate (any valid id: padding never takes loss and no real token
// attends to it); position_ids restart at 0 for each sample; seq_ids number the samples of a
// row (one sample per row when not packing), so attention never crosses two samples. sample_ids give
// each token's sample as its index in the dataset (-1 on padding; empty: not known): the same whichever
// rank or micro-batch it lands in, which LoRA dropout's masks are keyed on.
struct TokenBatch {
  int batch = 0;
  int seq = 0;
  std::vector<std::int32_t> input_ids, position_ids, seq_ids, targets, sample_ids;
  std::int64_t real_tokens = 0;      // tokens of the samples, padding not counted
  std::int64_t num_targets() const;  // entries of targets != -100
};

// Pads samples[indices[i]] into row i with pad_id; seq = the longest of them (seq_len_multiple rounds
// it up).
TokenBatch collate(const std::vector<TokenizedSample>& samples, const std::vector<std::int64_t>& indices,
                   int seq_len_multiple = 1, std::int32_t pad_id = ByteTokenizer::kPad);

// Deterministic epoch order: a permutation of [0, n) from (seed, epoch).
std::vector<std::int64_t> epoch_permutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch);

}  // namespace shardft
