// Generation: the sampler (greedy, temperature, top_k, top_p, seeded draws), the decoding loop's stop
// rules and batch independence, prompts from conversations, and opening HF directories and checkpoints.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>

#include "config/recipe_sections.hpp"
#include "tests/common/self_communicator.hpp"
#include "data/datasets.hpp"
#include "io/safetensors.hpp"
#include "train/checkpoint.hpp"
#include "train/evaluate.hpp"
#include "infer/chat_model.hpp"
#include "infer/generate.hpp"
#include "infer/hf_export.hpp"
#include "train/trainer.hpp"

namespace shardft {
namespace {
namespace fs = std::filesystem;

const std::vector<float> kLogits = {1.0f, 2.5f, 0.5f, -1.0f, 2.0f, 0.0f};

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  std::vector<double> p(logits.size());
  double top = -1e300, sum = 0;
  for (float l : logits) top = std::max(top, l / temperature);
  for (std::size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp(logits[i] / temperature - top);
  for (double& x : p) x /= sum;
  return p;
}

SamplingOptions sampled(double temperature, double top_p = 1.0, int top_k = 0, std::uint64_t seed = 0) {
  SamplingOptions o;
  o.temperature = temperature;
  o.top_p = top_p;
  o.top_k = top_k;
  o.seed = seed;
  return o;
}

std::vector<float> random_logits(int vocab, std::uint64_t seed) {
  SamplingRng rng(seed, 0);
  std::vector<float> l(static_cast<std::size_t>(vocab));
  for (float& x : l) x = static_cast<float>(8.0 * rng.uniform() - 4.0);
  return l;
}

int argmax(const std::vector<float>& l) { return static_cast<int>(std::max_element(l.begin(), l.end()) - l.begin()); }

TEST(Sampler, TemperatureZeroIsArgmaxAndDrawsNothing) {
  for (std::uint64_t s = 0; s < 20; ++s) {
    const auto l = random_logits(300, s);
    SamplingRng rng(s, 0), untouched(s, 0);
    EXPECT_EQ(sample_token(l.data(), 300, sampled(0.0, 0.5, 3, s), rng), argmax(l));
    EXPECT_EQ(rng.next(), untouched.next());
  }
  const std::vector<float> ties = {0.f, 3.f, 1.f, 3.f};
  SamplingRng rng(1, 0);
  EXPECT_EQ(sample_token(ties.data(), 4, SamplingOptions{}, rng), 1);  // the first of equal maxima, as eval did
  const auto d = sampling_distribution(ties.data(), 4, SamplingOptions{});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].first, 1);
  EXPECT_EQ(d[0].second, 1.0);
}

TEST(Sampler, TinyTopPOrTopKOneIsArgmax) {
  for (std::uint64_t s = 0; s < 200; ++s) {
    const auto l = random_logits(50, s % 7);
    SamplingRng a(s, 1), b(s, 2);
    EXPECT_EQ(sample_token(l.data(), 50, sampled(1.5, 1e-9, 0, s), a), argmax(l));
    EXPECT_EQ(sample_token(l.data(), 50, sampled(1.5, 1.0, 1, s), b), argmax(l));
  }
}

TEST(Sampler, DistributionIsSoftmaxOfScaledLogits) {
  for (double t : {0.3, 1.0, 2.0}) {
    const auto want = softmax(kLogits, t);
    const auto d = sampling_distribution(kLogits.data(), static_cast<int>(kLogits.size()), sampled(t));
    ASSERT_EQ(d.size(), kLogits.size());
    double sum = 0;
    for (std::size_t i = 0; i < d.size(); ++i) {
      EXPECT_NEAR(d[i].second, want[d[i].first], 1e-12);
      if (i > 0) {
        EXPECT_GE(d[i - 1].second, d[i].second);  // most likely first
      }
      sum += d[i].second;
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
}

TEST(Sampler, TopPKeepsTheSmallestSetWhoseMassReachesP) {
  // Probabilities 0.4, 0.3, 0.2, 0.1 at temperature 1.
  const std::vector<float> l = {std::log(0.2f), std::log(0.4f), std::log(0.1f), std::log(0.3f)};
  auto support = [&](double top_p, int top_k = 0) {
    std::vector<int> ids;
    for (const auto& [id, p] : sampling_distribution(l.data(), 4, sampled(1.0, top_p, top_k))) ids.push_back(id);
    return ids;
  };
  EXPECT_EQ(support(0.3), (std::vector<int>{1}));
  EXPECT_EQ(support(0.39), (std::vector<int>{1}));
  EXPECT_EQ(support(0.45), (std::vector<int>{1, 3}));
  EXPECT_EQ(support(0.65), (std::vector<int>{1, 3}));
  EXPECT_EQ(support(0.75), (std::vector<int>{1, 3, 0}));
  EXPECT_EQ(support(0.95), (std::vector<int>{1, 3, 0, 2}));
  EXPECT_EQ(support(1.0), (std::vector<int>{1, 3, 0, 2}));
  // top_k first, then the nucleus of the renormalised top_k: 0.4/0.7 = 0.571 < 0.6 needs both.
  EXPECT_EQ(support(0.6, 2), (std::vector<int>{1, 3}));
  EXPECT_EQ(support(0.5, 2), (std::vector<int>{1}));
  EXPECT_EQ(support(1.0, 3), (std::vector<int>{1, 3, 0}));
  // Renormalised over what is kept.
  const auto d = sampling_distribution(l.data(), 4, sampled(1.0, 0.65));
  EXPECT_NEAR(d[0].second, 0.4 / 0.7, 1e-6);
  EXPECT_NEAR(d[1].second, 0.3 / 0.7, 1e-6);
}

TEST(Sampler, EmpiricalFrequenciesMatchTheDistribution) {
  const int n = 200000;
  const int vocab = static_cast<int>(kLogits.size());
  struct Case {
    SamplingOptions opt;
    std::vector<double> want;
  };
  const auto full = softmax(kLogits, 0.8);
  // top_k 3 keeps ids 1, 4, 0 renormalised; top_p 0.8 on temperature 1.0 keeps 1, 4 (and 0 when needed).
  std::vector<double> topk(vocab, 0.0);
  const auto t1 = softmax(kLogits, 1.0);
  const double m3 = t1[1] + t1[4] + t1[0];
  topk[1] = t1[1] / m3;
  topk[4] = t1[4] / m3;
  topk[0] = t1[0] / m3;
  std::vector<double> nucleus(vocab, 0.0);
  ASSERT_LT(t1[1] + t1[4], 0.8);
  ASSERT_GE(t1[1] + t1[4] + t1[0], 0.8);
  nucleus[1] = topk[1];
  nucleus[4] = topk[4];
  nucleus[0] = topk[0];
  const std::vector<Case> cases = {
      {sampled(0.8, 1.0, 0, 7), full}, {sampled(1.0, 1.0, 3, 8), topk}, {sampled(1.0, 0.8, 0, 9), nucleus}};
  for (const Case& c : cases) {
    std::vector<int> count(vocab, 0);
    SamplingRng rng(c.opt.seed, 0);
    for (int i = 0; i < n; ++i) ++count[sample_token(kLogits.data(), vocab, c.opt, rng)];
    for (int v = 0; v < vocab; ++v) {
      const double sigma = std::sqrt(std::max(c.want[v] * (1 - c.want[v]), 1e-12) / n);
      EXPECT_NEAR(static_cast<double>(count[v]) / n, c.want[v], 5 * sigma + 1e-9) << "token " << v;
    }
  }
}

TEST(Sampler, SameSeedSameTokensOtherSeedOrStreamOthers) {
  auto draws = [&](std::uint64_t seed, std::uint64_t stream) {
    SamplingRng rng(seed, stream);
    std::vector<int> out;
    for (int i = 0; i < 64; ++i) out.push_back(sample_token(kLogits.data(), 6, sampled(1.0, 0.95, 0, seed), rng));
    return out;
  };
  EXPECT_EQ(draws(5, 0), draws(5, 0));
  EXPECT_NE(draws(5, 0), draws(6, 0));
  EXPECT_NE(draws(5, 0), draws(5, 1));
  SamplingRng u(3, 4);
  for (int i = 0; i < 1000; ++i) {
    const double x = u.uniform();
    EXPECT_GE(x, 0.0);
    EXPECT_LT(x, 1.0);
  }
}

TEST(Sampler, OptionsOutOfRangeAreRejectedByName) {
  auto message = [](const SamplingOptions& o) {
    try {
      check_sampling_options(o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message(sampled(-0.1)).rfind("temperature:", 0), 0u);
  EXPECT_EQ(message(sampled(NAN)).rfind("temperature:", 0), 0u);
  EXPECT_EQ(message(sampled(1.0, 0.0)).rfind("top_p:", 0), 0u);
  EXPECT_EQ(message(sampled(1.0, 1.5)).rfind("top_p:", 0), 0u);
  EXPECT_EQ(message(sampled(1.0, 1.0, -1)).rfind("top_k:", 0), 0u);
  EXPECT_EQ(message(sampled(0.7, 0.9, 40)), "");
}

// ---- the decoding loop on a small random model ------------------------------------------------

ModelConfig tiny_model() {
  ModelConfig m;
  m.vocab_size = ByteTokenizer::kVocabSize;
  m.hidden_size = 32;
  m.num_hidden_layers = 2;
  m.num_attention_heads = 4;
  m.num_key_value_heads = 2;
  m.intermediate_size = 48;
  m.max_position_embeddings = 64;
  m.initializer_range = 0.5;  // peaked logits, so greedy is not decided by rounding
  return m;
}

struct TinyModel {
  Decoder model{tiny_model(), ComputeDtype::fp32};
  LocalParams params{model.layout()};
  TinyModel() { init_params(model.layout(), model.config(), 3, params.weights()); }
};

std::vector<std::vector<std::int32_t>> three_prompts() {
  ByteTokenizer tok;
  std::vector<std::vector<std::int32_t>> p;
  for (const char* q : {"upper: ab", "upper: qwertyuiop", "x"}) {
    p.push_back(make_generation_prompt(tok, {{"user", q}, {"assistant", ""}}).prompt_ids);
  }
  return p;
}

TEST(Generate, GreedyStopsAtLengthContextAndStopIds) {
  TinyModel m;
  const auto prompts = three_prompts();
  // No stop ids reachable: every row runs to max_new_tokens.
  auto g = generate(m.model, m.params, prompts, 5, 64, {}, ByteTokenizer::kPad, SamplingOptions{});
  for (const auto& row : g) {
    EXPECT_EQ(row.tokens.size(), 5u);
    EXPECT_EQ(row.finish, FinishReason::length);
  }
  // greedy_generate (evaluation) is the same loop.
  const auto eval_rows = greedy_generate(m.model, m.params, prompts, 5, 64, {}, ByteTokenizer::kPad);
  for (std::size_t r = 0; r < prompts.size(); ++r) EXPECT_EQ(eval_rows[r], g[r].tokens);
  // The context limit counts prompt + generation per row; a prompt at the limit generates nothing.
  const int limit = static_cast<int>(prompts[0].size()) + 2;
  g = generate(m.model, m.params, prompts, 5, limit, {}, ByteTokenizer::kPad, SamplingOptions{});
  EXPECT_EQ(g[0].tokens.size(), 2u);
  EXPECT_EQ(g[0].finish, FinishReason::context);
  EXPECT_TRUE(g[1].tokens.empty());
  EXPECT_EQ(g[1].finish, FinishReason::context);
  EXPECT_EQ(g[2].tokens.size(), 5u);  // shorter prompt: not held back by the long one
  // Stop on the first greedy token of row 0: nothing generated, finish "stop"; the others go on.
  const auto first = generate(m.model, m.params, {prompts[0]}, 1, 64, {}, ByteTokenizer::kPad, SamplingOptions{});
  g = generate(m.model, m.params, prompts, 5, 64, {first[0].tokens[0]}, ByteTokenizer::kPad, SamplingOptions{});
  EXPECT_TRUE(g[0].tokens.empty());
  EXPECT_EQ(g[0].finish, FinishReason::stop);
  for (std::size_t r = 1; r < g.size(); ++r) {
    for (std::int32_t t : g[r].tokens) EXPECT_NE(t, first[0].tokens[0]);
  }
}

TEST(Generate, SampledRowsDependOnSeedAndStreamNotOnTheBatch) {
  TinyModel m;
  const auto prompts = three_prompts();
  const SamplingOptions opt = sampled(1.0, 0.95, 0, 1234);
  const auto together = generate(m.model, m.params, prompts, 12, 64, {}, ByteTokenizer::kPad, opt, 10);
  const auto again = generate(m.model, m.params, prompts, 12, 64, {}, ByteTokenizer::kPad, opt, 10);
  for (std::size_t r = 0; r < prompts.size(); ++r) {
    EXPECT_EQ(together[r].tokens, again[r].tokens);
    const auto alone = generate(m.model, m.params, {prompts[r]}, 12, 64, {}, ByteTokenizer::kPad, opt, 10 + r);
    EXPECT_EQ(alone[0].tokens, together[r].tokens) << "row " << r;
  }
  const auto other =
      generate(m.model, m.params, prompts, 12, 64, {}, ByteTokenizer::kPad, sampled(1.0, 0.95, 0, 99), 10);
  int differ = 0;
  for (std::size_t r = 0; r < prompts.size(); ++r) differ += other[r].tokens != together[r].tokens;
  EXPECT_GT(differ, 0);
}

// ---- prompts ------------------------------------------------------------------------------------

TEST(ChatPrompts, ReferenceSystemTextAndHistory) {
  ByteTokenizer tok;
  ChatEncoder enc(tok, builtin_chat_template(ChatTemplateKind::shardft));
  const Conversation qa = {{"user", "upper: abc"}, {"assistant", "ABC"}};
  ChatPrompt p = make_chat_prompt(enc, qa, "");
  EXPECT_TRUE(p.has_reference);
  EXPECT_EQ(p.reference, "ABC");
  EXPECT_EQ(p.ids, enc.generation_prompt(qa).prompt_ids);
  EXPECT_EQ(p.turns.size(), 1u);
  // Ending with the user: the whole conversation is the prompt; --system only where there is none.
  p = make_chat_prompt(enc, {{"user", "hi"}}, "be brief");
  EXPECT_FALSE(p.has_reference);
  ASSERT_EQ(p.turns.size(), 2u);
  EXPECT_EQ(p.turns[0].role, "system");
  EXPECT_EQ(tok.decode(p.ids), "<|bos|><|system|>be brief<|end|><|user|>hi<|end|><|assistant|>");
  p = make_chat_prompt(enc, {{"system", "own"}, {"user", "hi"}}, "be brief");
  EXPECT_EQ(tok.decode(p.ids), "<|bos|><|system|>own<|end|><|user|>hi<|end|><|assistant|>");
  // Plain text is continued: no end-of-text.
  p = make_chat_prompt(enc, {{kTextRole, "once upon"}}, "");
  EXPECT_EQ(tok.decode(p.ids), "<|bos|>once upon");

  // A chat that outgrows the context drops its oldest turns.
  Conversation history = {{"user", std::string(20, 'a')}, {"assistant", std::string(20, 'b')}, {"user", "last"}};
  p = fit_chat_prompt(enc, history, "", 30, 4);
  EXPECT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].content, "last");
  EXPECT_LE(static_cast<int>(p.ids.size()) + 4, 30);
  history = {{"user", std::string(40, 'a')}};
  EXPECT_THROW(fit_chat_prompt(enc, history, "", 30, 4), DataError);
}

TEST(ChatPrompts, PromptFilesNeedNoAssistantTurn) {
  char path[] = "/tmp/shardft_prompts_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text =
      "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}\n{\"prompt\": \"b\"}\n"
      "{\"prompt\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": \"c\"}]}\n"
      "{\"prompt\": \"d\", \"completion\": \"D\"}\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  DatasetOptions opt;
  EXPECT_THROW(read_dataset(path, opt), DataError);  // training data needs an assistant turn
  opt.require_assistant = false;
  const auto convs = read_dataset(path, opt);
  unlink(path);
  std::vector<std::string> flat;
  for (const auto& c : convs) {
    std::string f;
    for (const Turn& t : c) f += t.role + ":" + t.content + " ";
    flat.push_back(f);
  }
  EXPECT_EQ(flat, (std::vector<std::string>{"user:a ", "user:b ", "system:s user:c ", "user:d assistant:D "}));
}

// ---- opening model directories --------------------------------------------------------------------

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/shardft_gen_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::vector<float> host_weights(const LocalParams& p) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.weights());
  return std::vector<float>(h.data(), h.data() + h.extent(0));
}

TEST(OpenChatModel, HfDirectoryCheckpointAndOutputDirWithoutModel) {
  TempDir tmp;
  TrainConfig cfg;
  cfg.model = tiny_model();
  cfg.output_dir = (tmp.path / "run").string();
  cfg.chat_template = "plain";  // the run's recipe says so; a bare open must pick it up
  cfg.max_seq_length = 48;
  Trainer tr(cfg, 1, self());
  const std::string ckpt = save_checkpoint(checkpoint_config(cfg), tr, {3, 0.0, ""});
  const std::vector<float> master = tr.engine().gather_master();
  std::ostringstream log;

  // The output_dir has checkpoints but no model.safetensors yet: its latest checkpoint.
  ChatModel cm = open_chat_model(cfg.output_dir, "--model", TrainConfig{}, log);
  EXPECT_NE(log.str().find("latest checkpoint"), std::string::npos) << log.str();
  EXPECT_EQ(host_weights(*cm.params), master);
  EXPECT_EQ(cm.cfg.model.hidden_size, 32);
  EXPECT_EQ(cm.cfg.chat_template, "plain");
  EXPECT_EQ(cm.context_limit, 48);
  EXPECT_EQ(cm.limit_reason, "max_seq_length");

  // The checkpoint itself; a recipe that sets a key wins over the run's.
  TrainConfig mine = load_train_config("", {"--chat_template=shardft"});
  cm = open_chat_model(ckpt, "--model", mine, log);
  EXPECT_EQ(host_weights(*cm.params), master);
  EXPECT_EQ(cm.cfg.chat_template, "shardft");
  EXPECT_NE(cm.source.find("step 3"), std::string::npos);

  // An HF directory as `train` leaves its output_dir.
  const ParamLayout& layout = tr.model().layout();
  std::vector<NamedTensorRef> refs;
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    refs.push_back(
        {layout.params()[p].name, layout.params()[p].shape, master.data() + layout.offset(static_cast<int>(p))});
  }
  write_safetensors_f32(cfg.output_dir + "/model.safetensors", refs);
  write_hf_config(cfg.output_dir, model_meta_json(cfg.model), nullptr, TensorDtype::F32);
  cm = open_chat_model(cfg.output_dir, "--model", TrainConfig{}, log);
  EXPECT_EQ(host_weights(*cm.params), master);
  EXPECT_EQ(cm.cfg.chat_template, "plain");
  EXPECT_NE(cm.source.find("llama"), std::string::npos);
  // Without a run recipe the limit is the model's max_position_embeddings.
  fs::remove(fs::path(cfg.output_dir) / "latest");
  cm = open_chat_model(cfg.output_dir, "--model", TrainConfig{}, log);
  EXPECT_EQ(cm.context_limit, 64);
  EXPECT_EQ(cm.cfg.chat_template, "auto");  // the default: no tokenizer_config.json here, so shardft
  EXPECT_EQ(cm.encoder->chat_template().kind, ChatTemplateKind::shardft);

  // Neither: the message names the flag and the directory.
  try {
    open_chat_model(tmp.path.string(), "--model", TrainConfig{}, log);
    FAIL() << "opened a directory without a model";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--model: '" + tmp.path.string() + "' holds no model"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(open_chat_model((tmp.path / "nothing").string(), "--model", TrainConfig{}, log), ConfigError);
}

}  // namespace
}  // namespace shardft
