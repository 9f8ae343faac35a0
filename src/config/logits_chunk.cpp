#include "config/logits_chunk.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace shardft {

namespace {
constexpr int kHostChunk = 256;
constexpr int kGpuMinChunk = 2048;
constexpr int kChunkMultiple = 256;
constexpr double kLogitsShareOfFreeMemory = 1.0 / 16;

std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GB", bytes / 1e9);
  return text;
}
}  // namespace

LogitsChunkChoice auto_logits_chunk_tokens(const TrainConfig& cfg, bool gpu, double free_device_bytes) {
  if (!gpu) return {kHostChunk, std::to_string(kHostChunk) + " tokens on the host"};
  const std::int64_t micro_batch =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(cfg.per_device_train_batch_size) * cfg.max_seq_length);
  const double bytes_per_token = static_cast<double>(std::max(1, cfg.model.vocab_size)) * (cfg.bf16 ? 2 : 4);
  const double budget = std::max(0.0, free_device_bytes) * kLogitsShareOfFreeMemory;
  const std::int64_t fit = static_cast<std::int64_t>(std::floor(budget / bytes_per_token)) / kChunkMultiple * kChunkMultiple;
  const std::int64_t tokens = std::min<std::int64_t>(micro_batch, std::max<std::int64_t>(kGpuMinChunk, fit));
  const std::string logits = cfg.bf16 ? "bf16" : "fp32";
  std::string why = std::to_string(tokens) + " tokens on a GPU (" + gigabytes(tokens * bytes_per_token) + " of " +
                    logits + " logits";
  if (tokens == micro_batch) {
    why += ", one micro-batch of " + std::to_string(micro_batch) + " tokens";
  } else if (tokens == fit) {
    why += ", 1/16 of the " + gigabytes(free_device_bytes) + " free";
  } else {
    why += ", the least a GPU chunk takes";
  }
  return {static_cast<int>(tokens), why + ")"};
}

}  // namespace shardft
