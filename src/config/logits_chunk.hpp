#pragma once
// logits_chunk_tokens: auto. The fused LM head + cross-entropy runs a chunk of tokens at a time: the
// chunk's logits [tokens, vocab] are the step's largest activation, and each chunk reads the head's
// weights twice (forward and dgrad) and reads and adds into their fp32 gradient. On the host a chunk of
// 256 tokens stays small (256 x 32000 fp32 logits are 33 MB) and the step is bound by its GEMMs. On a GPU
// every chunk re-reads [vocab, hidden] weights and rewrites an fp32 [vocab, hidden] gradient: with a
// 128k vocabulary and hidden 2048, 16 chunks of 256 tokens move about 30 GB a step that 2 chunks of 2048
// do not, and a 256-row GEMM leaves most of the tensor cores idle. So auto is
//  - on the host: 256 tokens;
//  - on a GPU: as many tokens as 1/16 of the device's free memory holds in logits (bf16 in a bf16 step,
//    else fp32), a multiple of 256, at least 2048, and at most one micro-batch's tokens
//    (per_device_train_batch_size x max_seq_length): a chunk is never larger than what it splits.
#include <string>

#include "config/train_config.hpp"

namespace shardft {

struct LogitsChunkChoice {
  int tokens = 0;
  std::string why;  // "4096 tokens on a GPU (...)": the startup report shows it as the key's source
};

// What auto means for `cfg` on this device: a GPU with `free_device_bytes` free, or the host.
LogitsChunkChoice auto_logits_chunk_tokens(const TrainConfig& cfg, bool gpu, double free_device_bytes);

}  // namespace shardft
