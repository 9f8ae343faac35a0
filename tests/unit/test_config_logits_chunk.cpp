// logits_chunk_tokens: auto (config/logits_chunk.hpp): 256 on the host; on a GPU what 1/16 of its free
// memory holds in logits, at least 2048 and at most a micro-batch; resolved where the key was auto only,
// and recorded as the key's source.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config_error.hpp"
#include "config/logits_chunk.hpp"
#include "config/recipe_schema.hpp"
#include "config/train_config.hpp"

namespace shardft {
namespace {

TrainConfig llama_1b_shape(bool bf16) {
  TrainConfig cfg;
  cfg.model.vocab_size = 128256;
  cfg.per_device_train_batch_size = 2;
  cfg.max_seq_length = 2048;
  cfg.bf16 = bf16;
  return cfg;
}

TEST(ConfigLogitsChunk, AutoIsTheHostsChunkOffTheGpu) {
  const LogitsChunkChoice c = auto_logits_chunk_tokens(llama_1b_shape(true), false, 0);
  EXPECT_EQ(c.tokens, 256);
  EXPECT_EQ(c.why, "256 tokens on the host");
}

TEST(ConfigLogitsChunk, AutoOnAGpuTakesWhatASixteenthOfItsFreeMemoryHolds) {
  // An H200's ~140 GB: 1/16 holds 34k tokens of bf16 logits, more than the micro-batch's 4096.
  const LogitsChunkChoice whole = auto_logits_chunk_tokens(llama_1b_shape(true), true, 140e9);
  EXPECT_EQ(whole.tokens, 4096);
  EXPECT_NE(whole.why.find("one micro-batch of 4096 tokens"), std::string::npos) << whole.why;
  // 24 GB free, fp32 logits (4 bytes), 8 sequences: 1.5e9 / (128256 * 4) = 2923 tokens -> 2816 (a multiple of 256).
  TrainConfig big_batch = llama_1b_shape(false);
  big_batch.per_device_train_batch_size = 8;
  const LogitsChunkChoice fit = auto_logits_chunk_tokens(big_batch, true, 24e9);
  EXPECT_EQ(fit.tokens, 2816);
  EXPECT_NE(fit.why.find("1/16 of the 24.0 GB free"), std::string::npos) << fit.why;
  // Little free memory: never below 2048 tokens on a GPU (smaller chunks cost more time than they save)...
  const LogitsChunkChoice floor = auto_logits_chunk_tokens(big_batch, true, 4e9);
  EXPECT_EQ(floor.tokens, 2048);
  EXPECT_NE(floor.why.find("the least a GPU chunk takes"), std::string::npos) << floor.why;
  // ... nor above the micro-batch it splits.
  TrainConfig short_rows = llama_1b_shape(true);
  short_rows.per_device_train_batch_size = 1;
  short_rows.max_seq_length = 512;
  EXPECT_EQ(auto_logits_chunk_tokens(short_rows, true, 4e9).tokens, 512);
}

TEST(ConfigLogitsChunk, ResolvedOnlyWhereTheKeyIsAuto) {
  TrainConfig by_default = load_train_config("", {});
  EXPECT_TRUE(by_default.logits_chunk_auto);
  EXPECT_EQ(value_text(by_default, *find_recipe_key("logits_chunk_tokens")), "auto");
  resolve_logits_chunk_auto(by_default, 4096, "4096 tokens on a GPU");
  EXPECT_FALSE(by_default.logits_chunk_auto);
  EXPECT_EQ(by_default.logits_chunk_tokens, 4096);
  EXPECT_EQ(source_of(by_default, "logits_chunk_tokens"), "auto: 4096 tokens on a GPU");
  EXPECT_EQ(value_text(by_default, *find_recipe_key("logits_chunk_tokens")), "4096");

  TrainConfig asked = load_train_config("", {"--logits_chunk_tokens=AUTO"});
  EXPECT_TRUE(asked.logits_chunk_auto);
  resolve_logits_chunk_auto(asked, 256, "256 tokens on the host");
  EXPECT_EQ(source_of(asked, "logits_chunk_tokens"), "--logits_chunk_tokens, auto: 256 tokens on the host");

  TrainConfig fixed = load_train_config("", {"--logits_chunk_tokens=1024"});
  EXPECT_FALSE(fixed.logits_chunk_auto);
  resolve_logits_chunk_auto(fixed, 4096, "ignored: the key was set");
  EXPECT_EQ(fixed.logits_chunk_tokens, 1024);
  TrainConfig zero = load_train_config("", {"--logits_chunk_tokens=0"});  // 0: all tokens at once
  EXPECT_EQ(zero.logits_chunk_tokens, 0);
  EXPECT_FALSE(zero.logits_chunk_auto);

  try {
    load_train_config("", {"--logits_chunk_tokens=many"});
    FAIL() << "logits_chunk_tokens: many was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'logits_chunk_tokens' expects an integer or auto, got 'many'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(load_train_config("", {"--logits_chunk_tokens=-1"}), ConfigError);
}

}  // namespace
}  // namespace shardft
