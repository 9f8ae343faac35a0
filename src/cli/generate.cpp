// `shardft generate`: talk to a trained model. Greedy or sampled completions of one prompt, of a file of
// conversations (one JSON line each), or of a chat on stdin (--interactive).
#include "infer/chat_model.hpp"
#include "infer/generate.hpp"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "config/train_config.hpp"
#include "data/datasets.hpp"
#include "config/recipe_sections.hpp"

namespace shardft::cli {

namespace {

struct GenerateArgs {
  std::string model_dir, prompt, prompts_file, system;
  bool has_prompt = false, interactive = false;
  bool use_cache = true;  // HF generate's use_cache; false re-runs the whole sequence for each token
  int max_new_tokens = 128;
  SamplingOptions sampling;
  std::vector<std::string> rest;  // --config, --deepspeed and recipe overrides
};

double parse_number(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE) {
    throw ConfigError(flag + ": expected a number, got '" + text + "'");
  }
  return v;
}

long long parse_integer(const std::string& flag, const std::string& text, long long min) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || v < min) {
    throw ConfigError(flag + ": expected an integer >= " + std::to_string(min) + ", got '" + text + "'");
  }
  return v;
}

GenerateArgs parse_generate_args(const std::vector<std::string>& args) {
  GenerateArgs g;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    bool inline_value = false;
    const std::size_t eq = flag.find('=');
    if (flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      inline_value = true;
    }
    static const char* const kValueFlags[] = {"--model",  "--prompt",         "--prompts_file",
                                              "--system", "--max_new_tokens", "--temperature",
                                              "--top_p",  "--top_k",          "--seed",
                                              "--use_cache"};
    bool ours = false;
    for (const char* f : kValueFlags) ours = ours || flag == f;
    if (flag == "--interactive") {
      if (inline_value) throw ConfigError("--interactive takes no value");
      g.interactive = true;
      continue;
    }
    if (!ours) {
      g.rest.push_back(args[i]);
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) throw ConfigError(flag + ": expected a value after it");
      value = args[++i];
    }
    if (flag == "--model") {
      g.model_dir = value;
    } else if (flag == "--prompt") {
      g.prompt = value;
      g.has_prompt = true;
    } else if (flag == "--prompts_file") {
      g.prompts_file = value;
    } else if (flag == "--system") {
      g.system = value;
    } else if (flag == "--max_new_tokens") {
      const long long n = parse_integer(flag, value, 1);
      g.max_new_tokens = n > 1 << 30 ? 1 << 30 : static_cast<int>(n);
    } else if (flag == "--temperature") {
      g.sampling.temperature = parse_number(flag, value);
    } else if (flag == "--top_p") {
      g.sampling.top_p = parse_number(flag, value);
    } else if (flag == "--top_k") {
      const long long k = parse_integer(flag, value, 0);
      g.sampling.top_k = k > 1 << 30 ? 1 << 30 : static_cast<int>(k);
    } else if (flag == "--seed") {
      g.sampling.seed = static_cast<std::uint64_t>(parse_integer(flag, value, 0));
    } else if (flag == "--use_cache") {
      std::string v = value;  // true / false, and Python's True / False
      for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (v != "true" && v != "false") throw ConfigError(flag + ": expected true or false, got '" + value + "'");
      g.use_cache = v == "true";
    }
  }
  try {
    check_sampling_options(g.sampling);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(std::string("--") + e.what());
  }
  const int modes = (g.has_prompt ? 1 : 0) + (g.prompts_file.empty() ? 0 : 1) + (g.interactive ? 1 : 0);
  if (modes != 1) {
    throw ConfigError(std::string(modes == 0 ? "nothing to generate from" : "more than one input") +
                      ": give exactly one of --prompt TEXT, --prompts_file FILE or --interactive");
  }
  if (g.has_prompt && g.prompt.empty()) throw ConfigError("--prompt: empty prompt");
  return g;
}

std::string describe_sampling(const SamplingOptions& s) {
  if (s.greedy()) return "greedy";
  std::ostringstream d;
  d << "sampling: temperature " << s.temperature << ", top_p " << s.top_p;
  if (s.top_k > 0) d << ", top_k " << s.top_k;
  d << ", seed " << s.seed;
  return d.str();
}

// Generated text can end inside a UTF-8 character (max_new_tokens); JSON output replaces the broken bytes.
std::string json_line(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

nlohmann::ordered_json turns_json(const Conversation& conv) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Turn& t : conv) list.push_back({{"role", t.role}, {"content", t.content}});
  return list;
}

void check_fits(const ChatModel& cm, const ChatPrompt& p, const std::string& what) {
  if (static_cast<int>(p.ids.size()) >= cm.context_limit) {
    throw DataError(what + ": the prompt is " + std::to_string(p.ids.size()) +
                    " tokens with the template; the context limit is " + std::to_string(cm.context_limit) + " (" +
                    cm.limit_reason + ")" +
                    (cm.limit_reason == "max_seq_length" && cm.context_limit < cm.cfg.model.max_position_embeddings
                         ? "; --max_seq_length raises it up to the model's max_position_embeddings " +
                               std::to_string(cm.cfg.model.max_position_embeddings)
                         : ""));
  }
}

std::vector<Generation> run_generation(const ChatModel& cm, const GenerateArgs& g,
                                       const std::vector<std::vector<std::int32_t>>& prompts, std::uint64_t first_stream) {
  const ChatEncoder& enc = *cm.encoder;
  return shardft::generate(*cm.model, *cm.params, prompts, g.max_new_tokens, cm.context_limit, enc.stop_ids(),
                           enc.pad_id(), g.sampling, first_stream, g.use_cache);
}

// --prompts_file: every record's answer as a JSON line on stdout, in batches of per_device_eval_batch_size.
void generate_for_file(const ChatModel& cm, const GenerateArgs& g, std::ostream& log) {
  const ChatEncoder& enc = *cm.encoder;
  DatasetOptions opt = dataset_options(cm.cfg);
  opt.require_assistant = false;
  std::vector<Conversation> convs;
  try {
    convs = read_dataset(g.prompts_file, opt);
  } catch (const DataError& e) {
    throw DataError(std::string("--prompts_file: ") + e.what());
  }
  std::vector<ChatPrompt> prompts;
  for (std::size_t i = 0; i < convs.size(); ++i) {
    prompts.push_back(make_chat_prompt(enc, std::move(convs[i]), g.system));
    check_fits(cm, prompts.back(), "--prompts_file " + g.prompts_file + ": record " + std::to_string(i + 1));
  }
  const std::size_t batch = static_cast<std::size_t>(std::max(1, cm.cfg.per_device_eval_batch_size));
  double seconds = 0;
  std::size_t new_tokens = 0;
  for (std::size_t start = 0; start < prompts.size(); start += batch) {
    const std::size_t end = std::min(prompts.size(), start + batch);
    std::vector<std::vector<std::int32_t>> ids;
    for (std::size_t i = start; i < end; ++i) ids.push_back(prompts[i].ids);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<Generation> gens = run_generation(cm, g, ids, start);  // prompt i always samples with stream i
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (std::size_t i = start; i < end; ++i) {
      const Generation& gen = gens[i - start];
      new_tokens += gen.tokens.size();
      nlohmann::ordered_json line{{"index", i},
                                  {"prompt", turns_json(prompts[i].turns)},
                                  {"generation", enc.tokenizer().decode(gen.tokens)},
                                  {"finish_reason", finish_reason_name(gen.finish)},
                                  {"new_tokens", gen.tokens.size()}};
      if (prompts[i].has_reference) line["reference"] = prompts[i].reference;
      std::cout << json_line(line) << std::endl;
    }
  }
  log << "generate: " << new_tokens << " new tokens for " << prompts.size() << " prompts in " << seconds << " s ("
      << (seconds > 0 ? static_cast<double>(new_tokens) / seconds : 0.0) << " tokens/s, batches of " << batch << ")"
      << std::endl;
}

// --interactive: each line of stdin is the user's next turn; the answers keep the conversation going.
void chat_interactively(const ChatModel& cm, const GenerateArgs& g, std::ostream& log) {
  const ChatEncoder& enc = *cm.encoder;
  log << "interactive chat: one message per line; /reset starts over; end with Ctrl-D" << std::endl;
  Conversation history;
  std::string line;
  const int room = std::min(g.max_new_tokens, std::max(1, cm.context_limit / 4));
  std::uint64_t turn = 0;
  const bool terminal = isatty(STDIN_FILENO) != 0;
  while ((terminal ? log << "> " << std::flush : log), std::getline(std::cin, line)) {
    if (line == "/reset") {
      history.clear();
      continue;
    }
    if (line.empty()) continue;
    history.push_back({"user", line});
    ChatPrompt p;
    try {
      p = fit_chat_prompt(enc, history, g.system, cm.context_limit, room);
    } catch (const DataError& e) {
      log << "shardft: " << e.what() << std::endl;
      history.pop_back();
      continue;
    }
    const Generation gen = run_generation(cm, g, {p.ids}, turn++).front();
    const std::string answer = enc.tokenizer().decode(gen.tokens);
    std::cout << answer << std::endl;
    history.push_back({"assistant", answer});
  }
}

}  // namespace

int generate(const std::vector<std::string>& args, const MpiSession& mpi) {
  const GenerateArgs g = parse_generate_args(args);
  if (mpi.size() > 1) {
    throw ConfigError("generate runs in one process, not " + std::to_string(mpi.size()) +
                      " ranks: start it without mpirun (or with -np 1)");
  }
  const Invocation inv = parse_invocation(g.rest);
  TrainConfig cfg = load_recipe(inv);
  std::ostream& log = std::cerr;
  const std::string what = g.model_dir.empty() ? "output_dir" : "--model";
  const std::string dir = g.model_dir.empty() ? cfg.output_dir : g.model_dir;
  const ChatModel cm = open_chat_model(dir, what, std::move(cfg), log);
  log << "generate: " << describe_sampling(g.sampling) << ", at most " << g.max_new_tokens << " new tokens"
      << (g.use_cache ? "" : ", no KV cache") << std::endl;
  if (g.has_prompt) {
    const ChatPrompt p = make_chat_prompt(*cm.encoder, {{"user", g.prompt}}, g.system);
    check_fits(cm, p, "--prompt");
    const Generation gen = run_generation(cm, g, {p.ids}, 0).front();
    std::cout << cm.encoder->tokenizer().decode(gen.tokens) << std::endl;
  } else if (!g.prompts_file.empty()) {
    generate_for_file(cm, g, log);
  } else {
    chat_interactively(cm, g, log);
  }
  return 0;
}

}  // namespace shardft::cli
