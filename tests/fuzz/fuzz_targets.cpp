#include "fuzz_targets.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "config/deepspeed_json.hpp"
#include "config/train_config.hpp"
#include "tokenizer/bpe_tokenizer.hpp"
#include "data/datasets.hpp"
#include "jinja/template.hpp"
#include "data/sft_data.hpp"
#include "io/checkpoint_meta.hpp"
#include "io/safetensors.hpp"

namespace shardft::fuzz {
namespace {

// Runs `parse`; the project's own errors mean the input was rejected cleanly.
template <typename F>
bool parses(F&& parse) {
  try {
    parse();
    return true;
  } catch (const ConfigError&) {
  } catch (const DataError&) {
  } catch (const FormatError&) {
  }
  return false;
}

[[noreturn]] void broken(const std::string& what) { throw std::logic_error("invariant broken: " + what); }

// The whole file: SafetensorsReader takes a path, so the bytes go to an in-memory file (memfd) that is
// opened by its /proc path. Every tensor read must hold exactly the elements its shape says.
bool safetensors(const std::string& bytes) {
  const int fd = memfd_create("fuzz.safetensors", 0);
  if (fd < 0) throw std::runtime_error("memfd_create failed");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) throw std::runtime_error("write to memfd failed");
    done += static_cast<std::size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  return parses([&] {
    for (const auto& [name, t] : read_safetensors_f32(path)) {
      std::uint64_t numel = 1;
      bool overflow = false;
      for (const std::int64_t d : t.shape) overflow |= d < 0 || __builtin_mul_overflow(numel, static_cast<std::uint64_t>(d), &numel);
      if (overflow || numel != t.data.size()) broken("tensor '" + name + "': shape and element count differ");
    }
  });
}

// tokenizer.json, then a few texts encoded (spans must tile the text) and decoded.
bool tokenizer(const std::string& bytes) {
  return parses([&] {
    const auto tok = parse_bpe_tokenizer(bytes, "tokenizer.json");
    const std::string texts[] = {"Hello, world! It's 2024.\n", "  x\t\ty  \r\n", u8"caf\u00e9 \u4f60\u597d \U0001F600 e\u0301",
                                 "<s>[INST] hi [/INST]</s><|im_start|>user<|endoftext|>", ""};
    for (const std::string& text : texts) {
      std::vector<TokenSpan> spans;
      const std::vector<std::int32_t> ids = tok->encode(text, &spans);
      if (spans.size() != ids.size()) broken("encode gave " + std::to_string(ids.size()) + " ids and " +
                                             std::to_string(spans.size()) + " spans");
      std::size_t at = 0;
      for (const TokenSpan& s : spans) {
        if (s.begin != at || s.end < s.begin || s.end > text.size()) broken("spans do not tile '" + text + "'");
        at = s.end;
      }
      if (!spans.empty() && at != text.size()) broken("spans end before the end of '" + text + "'");
      for (const std::int32_t id : ids) {
        if (id < 0 || id >= tok->vocab_size()) broken("encode gave id " + std::to_string(id) + " out of the vocab");
      }
      tok->decode(ids, false);
      tok->decode(ids, true);
    }
    tok->decode({-1, 0, 1, 2, 3, tok->vocab_size() - 1, tok->vocab_size(), 1 << 30}, false);
  });
}

// The recipe YAML; a recipe that loads must load again as to_yaml writes it (that is what is saved beside a run).
bool recipe(const std::string& bytes) {
  return parses([&] {
    const TrainConfig cfg = train_config_from_text("recipe.yaml", bytes, DeepSpeedConfig{}, {});
    const std::string saved = to_yaml(cfg);
    try {
      const TrainConfig again = train_config_from_text("saved.yaml", saved, DeepSpeedConfig{}, {});
      if (to_yaml(again) != saved) broken("to_yaml of the reloaded recipe differs:\n" + saved);
    } catch (const ConfigError& e) {
      broken(std::string("the recipe's to_yaml does not load: ") + e.what() + "\n" + saved);
    }
  });
}

// A DeepSpeed config applied over the defaults, and its startup report.
bool deepspeed(const std::string& bytes) {
  return parses([&] {
    const DeepSpeedConfig ds = parse_deepspeed_config(bytes, "ds_config.json");
    const TrainConfig cfg = train_config_from_text("", "", ds, {});
    describe_deepspeed_config(ds, cfg, 4);
  });
}

// A dataset file (JSON Lines or one JSON array). The first byte picks the options.
bool jsonl(const std::string& bytes) {
  if (bytes.empty()) return false;
  DatasetOptions opt;
  const unsigned char mode = static_cast<unsigned char>(bytes[0]);
  opt.skip_bad_samples = mode & 1;
  opt.require_assistant = !(mode & 2);
  if (mode & 4) opt.role_map = {{"bot", "assistant"}, {"human", "system"}};
  if (mode & 8) opt.text_field = "content";
  return parses([&] {
    DatasetFileReport report;
    const std::vector<Conversation> convs = read_dataset_text("data.jsonl", bytes.substr(1), opt, &report);
    if (convs.empty() || static_cast<std::int64_t>(convs.size()) != report.samples()) {
      broken(std::to_string(convs.size()) + " samples, the report says " + std::to_string(report.samples()));
    }
  });
}

// metadata.json. First byte 's': the rest is sealed first (when it is a JSON object), so that the checks
// behind the seal are reached too; otherwise the rest as it is.
bool checkpoint_meta(const std::string& bytes) {
  if (bytes.empty()) return false;
  std::string text = bytes.substr(1);
  if (bytes[0] == 's') {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return false;
    seal_metadata(j);
    text = j.dump();
  }
  return parses([&] { parse_checkpoint_meta(text, "checkpoint-1"); });
}

// A chat template (tokenizer_config.json's chat_template, downloaded with a model): parsed, then rendered
// with a conversation as transformers passes one. It may fail with a DataError; it must not crash, hang
// or run out of memory (src/jinja/limits.hpp bounds what a render may cost).
bool jinja(const std::string& bytes) {
  return parses([&] {
    const jinja::Template t(bytes, "chat_template");
    auto turn = [](const char* role, const char* content) {
      jinja::Dict d;
      d.set("role", jinja::Value::string(role));
      d.set("content", jinja::Value::string(content));
      return jinja::Value::of_dict(std::move(d));
    };
    jinja::Dict vars;
    vars.set("messages", jinja::Value::of_list({turn("system", "Be brief."), turn("user", "upper: abc"),
                                                turn("assistant", "ABC")}));
    vars.set("add_generation_prompt", jinja::Value::boolean(true));
    vars.set("bos_token", jinja::Value::string("<s>"));
    vars.set("eos_token", jinja::Value::string("</s>"));
    vars.set("tools", jinja::Value::none());
    const jinja::Template::Output out = t.render(vars);
    for (const auto& [begin, end] : out.generation_spans) {
      if (begin > end || end > out.text.size()) broken("a generation span outside the output");
    }
  });
}

}  // namespace

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"safetensors", safetensors}, {"tokenizer", tokenizer}, {"recipe", recipe},
      {"deepspeed", deepspeed},     {"jsonl", jsonl},         {"checkpoint_meta", checkpoint_meta},
      {"jinja", jinja},
  };
  return all;
}

const Target* find_target(const std::string& name) {
  for (const Target& t : targets()) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

}  // namespace shardft::fuzz
