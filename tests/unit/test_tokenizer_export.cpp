// What a run writes beside its model for transformers: tokenizer_config.json with the chat template it
// trained with (its own tokenizer_config.json's other keys kept) and generation_config.json stopping at
// the template's end of turn (the model's own generation settings kept).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/chat_template_source.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/tokenizer_export.hpp"

namespace fs = std::filesystem;

namespace shardft {
namespace {

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

TEST(TokenizerExport, ABuiltInTemplateGoesIntoANewTokenizerConfig) {
  const std::string tokenizer = SHARDFT_REFERENCE_DIR "/hf/tiny_qwen2/tokenizer.json";  // no tokenizer_config.json
  const auto tok = load_tokenizer(tokenizer);
  const ChatEncoder encoder(*tok, chat_template_for(ChatTemplateKind::chatml, *tok));
  TokenizerSources cfg;
  cfg.tokenizer_name_or_path = tokenizer;
  const TokenizerExport e = tokenizer_export(cfg, encoder);
  EXPECT_EQ(e.tokenizer_config.at("tokenizer_class"), "PreTrainedTokenizerFast");
  EXPECT_EQ(e.tokenizer_config.at("chat_template"), chat_template_jinja_source(encoder.chat_template()));
  EXPECT_EQ(e.tokenizer_config.at("eos_token"), "<|endoftext|>");
  EXPECT_EQ(e.tokenizer_config.at("pad_token"), tok->decode({encoder.pad_id()}));
  EXPECT_EQ(e.generation_config.at("eos_token_id"),
            nlohmann::json({tok->special_token_id("<|im_end|>"), tok->special_token_id("<|endoftext|>")}));

  const fs::path dir = fs::path(::testing::TempDir()) / "tokenizer_export";
  fs::create_directories(dir);
  write_tokenizer_export(e, dir.string());
  EXPECT_TRUE(fs::is_regular_file(dir / "tokenizer.json"));
  EXPECT_EQ(read_json(dir / "tokenizer_config.json"), e.tokenizer_config);
  EXPECT_EQ(read_json(dir / "generation_config.json"), e.generation_config);
  fs::remove_all(dir);
}

TEST(TokenizerExport, TheModelsOwnConfigsKeepTheirKeys) {
  const fs::path model = fs::path(::testing::TempDir()) / "export_source";
  fs::create_directories(model);
  fs::copy_file(SHARDFT_REFERENCE_DIR "/hf/tiny_qwen2/tokenizer.json", model / "tokenizer.json",
                fs::copy_options::overwrite_existing);
  std::ofstream(model / "tokenizer_config.json")
      << R"({"tokenizer_class": "Qwen2TokenizerFast", "eos_token": "<|im_end|>", "model_max_length": 32768})";
  std::ofstream(model / "generation_config.json") << R"({"eos_token_id": [7, 151645], "temperature": 0.7})";
  const auto tok = load_tokenizer(model.string());
  const ChatEncoder encoder(*tok, chat_template_for(ChatTemplateKind::chatml, *tok));
  TokenizerSources cfg;
  cfg.tokenizer_name_or_path = model.string();
  cfg.model_name_or_path = model.string();
  const TokenizerExport e = tokenizer_export(cfg, encoder);
  EXPECT_EQ(e.tokenizer_config.at("tokenizer_class"), "Qwen2TokenizerFast");
  EXPECT_EQ(e.tokenizer_config.at("eos_token"), "<|im_end|>");  // the tokenizer's own, kept
  EXPECT_EQ(e.tokenizer_config.at("model_max_length"), 32768);
  EXPECT_TRUE(e.tokenizer_config.at("chat_template").is_string());
  EXPECT_EQ(e.generation_config.at("temperature"), 0.7);
  // The template's stops first, then the model's own ids it did not have.
  std::vector<int> want = {tok->special_token_id("<|im_end|>"), tok->special_token_id("<|endoftext|>")};
  if (std::find(want.begin(), want.end(), 7) == want.end()) want.push_back(7);
  if (std::find(want.begin(), want.end(), 151645) == want.end()) want.push_back(151645);
  EXPECT_EQ(e.generation_config.at("eos_token_id"), nlohmann::json(want));

  std::ofstream(model / "generation_config.json") << "[not an object";
  EXPECT_THROW(tokenizer_export(cfg, encoder), DataError);
  fs::remove_all(model);
}

TEST(TokenizerExport, TheByteTokenizerGetsAGenerationConfigOnly) {
  ByteTokenizer tok;
  const ChatEncoder encoder(tok, chat_template_for(ChatTemplateKind::shardft, tok));
  const TokenizerExport e = tokenizer_export(TokenizerSources{}, encoder);
  EXPECT_TRUE(e.tokenizer_config.is_null());
  EXPECT_EQ(e.generation_config.at("eos_token_id"), tok.special_token_id("<|end|>"));
  EXPECT_EQ(e.generation_config.at("bos_token_id"), tok.special_token_id("<|bos|>"));
}

}  // namespace
}  // namespace shardft
