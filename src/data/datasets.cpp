// Reader for the dataset formats trl accepts (see datasets.hpp), and the weighted mixture of files.
// Every rejection names the file and the 1-based line, so a user can jump straight to the bad record.
#include "data/datasets.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/recipe_schema.hpp"

namespace shardft {
namespace {

using nlohmann::json;

// Where a record sits: its file, the line it starts on, and for JSON arrays its index.
struct RecordPlace {
  const std::string& path;
  std::int64_t line = 0;
  std::int64_t index = -1;  // -1: a JSON Lines record
};

[[noreturn]] void fail_at(const RecordPlace& at, const std::string& reason) {
  std::string where = at.path + ":" + std::to_string(at.line) + ": ";
  if (at.index >= 0) where += "record[" + std::to_string(at.index) + "]: ";
  throw DataError(where + reason);
}

std::string type_name(const json& value) { return value.type_name(); }

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

bool is_blank(const std::string& line) { return std::all_of(line.begin(), line.end(), is_space); }

// nlohmann's what() reads "[json.exception.parse_error.101] parse error at line 1, column 5: <why>".
// The exception id and the "line 1" (always 1: we parse one record at a time) only add noise, so keep
// the column and the reason.
std::string brief_parse_reason(const json::parse_error& e) {
  std::string what = e.what();
  const std::string marker = "parse error";
  std::size_t start = what.find(marker);
  if (start == std::string::npos) return what;
  std::size_t colon = what.find(": ", start);
  std::string reason = colon == std::string::npos ? what.substr(start) : what.substr(colon + 2);
  return "column " + std::to_string(e.byte) + ": " + reason;
}

// "[json.exception.out_of_range.406] number overflow parsing '1e999'" without its bracketed id.
std::string without_exception_id(const std::string& what) {
  const std::size_t close = what.find("] ");
  return what.rfind("[json.exception", 0) == 0 && close != std::string::npos ? what.substr(close + 2) : what;
}

// The field names of a turn: ShareGPT's from/value or the messages format's role/content.
struct TurnFields {
  const char* list;
  const char* role;
  const char* text;
};
constexpr TurnFields kShareGpt{"conversations", "from", "value"};
constexpr TurnFields kMessages{"messages", "role", "content"};

class RecordParser {
 public:
  explicit RecordParser(const DatasetOptions& options) : opt_(options) {}

  // `is_prompt_completion`: whether the record was a prompt / completion pair (trl's completion_only_loss
  // applies to those, assistant_only_loss to conversations).
  Conversation parse(const std::string& text, const RecordPlace& at, bool* is_prompt_completion) const {
    *is_prompt_completion = false;
    json record;
    try {
      record = json::parse(text);
    } catch (const json::parse_error& e) {
      fail_at(at, "not valid JSON (" + brief_parse_reason(e) + ")");
    } catch (const json::exception& e) {  // out_of_range.406: a number beyond a double's range
      fail_at(at, "not valid JSON (" + without_exception_id(e.what()) + ")");
    }
    if (!record.is_object()) fail_at(at, "expected a JSON object, got " + type_name(record));

    Conversation conv;
    if (record.contains("conversations") || record.contains("messages")) {
      const TurnFields& f = record.contains("conversations") ? kShareGpt : kMessages;
      conv = turns(record[f.list], f, f.list, at);
    } else if (record.contains("prompt") || record.contains("completion")) {
      conv = prompt_completion(record, at);
      *is_prompt_completion = true;
    } else if (record.contains(opt_.text_field)) {
      json& value = record[opt_.text_field];
      if (!value.is_string()) fail_at(at, "\"" + opt_.text_field + "\" must be a string, got " + type_name(value));
      if (value.get_ref<const std::string&>().empty()) fail_at(at, "\"" + opt_.text_field + "\" is empty");
      return {{kTextRole, std::move(value.get_ref<std::string&>())}};
    } else {
      fail_at(at, "missing \"conversations\" (or \"messages\", \"prompt\" and \"completion\", or \"" +
                      opt_.text_field + "\")");
    }
    // A sample without an assistant turn has no target tokens: it would cost compute and teach nothing.
    const bool has_assistant =
        std::any_of(conv.begin(), conv.end(), [](const Turn& t) { return t.role == "assistant"; });
    if (!has_assistant && opt_.require_assistant) fail_at(at, "conversation has no assistant (gpt) turn");
    return conv;
  }

 private:
  // trl / ShareGPT role names onto the three roles the chat templates know; the recipe's role_map
  // first, so it may also rename the usual ones. Empty when unknown.
  std::string map_role(const std::string& from) const {
    auto mapped = opt_.role_map.find(from);
    if (mapped != opt_.role_map.end()) return mapped->second;
    if (from == "human" || from == "user") return "user";
    if (from == "gpt" || from == "assistant") return "assistant";
    if (from == "system") return "system";
    return {};
  }

  // The record's strings are moved out of it (it is parsed for this and dropped): a huge turn is not copied.
  Conversation turns(json& list, const TurnFields& f, const std::string& name, const RecordPlace& at) const {
    if (!list.is_array()) fail_at(at, "\"" + name + "\" must be an array, got " + type_name(list));
    if (list.empty()) fail_at(at, "empty conversation");
    Conversation conv;
    conv.reserve(list.size());
    for (std::size_t i = 0; i < list.size(); ++i) conv.push_back(turn(list[i], i, f, name, at));
    return conv;
  }

  Turn turn(json& turn, std::size_t index, const TurnFields& f, const std::string& name,
            const RecordPlace& at) const {
    const std::string where = name + "[" + std::to_string(index) + "]";
    if (!turn.is_object()) fail_at(at, where + " must be an object, got " + type_name(turn));
    auto from = turn.find(f.role);
    if (from == turn.end()) fail_at(at, where + " has no \"" + f.role + "\"");
    if (!from->is_string()) fail_at(at, where + "." + f.role + " must be a string, got " + type_name(*from));
    auto value = turn.find(f.text);
    if (value == turn.end()) fail_at(at, where + " has no \"" + f.text + "\"");
    if (!value->is_string()) fail_at(at, where + "." + f.text + " must be a string, got " + type_name(*value));

    const std::string raw_role = from->get<std::string>();
    Turn out;
    out.role = map_role(raw_role);
    if (out.role.empty()) {
      fail_at(at, where + " has unknown role \"" + raw_role +
                      "\" (expected human, gpt, system, user or assistant; the recipe key role_map maps others)");
    }
    out.content = std::move(value->get_ref<std::string&>());
    return out;
  }

  // Strings: a user turn and the assistant's answer. Lists of messages: the prompt's turns, then the
  // completion's (trl's conversational prompt-completion).
  Conversation prompt_completion(json& record, const RecordPlace& at) const {
    if (!opt_.require_assistant && record.contains("prompt") && !record.contains("completion")) {
      json& prompt = record["prompt"];
      if (prompt.is_string()) return {{"user", prompt.get<std::string>()}};
      if (prompt.is_array()) return turns(prompt, kMessages, "prompt", at);
      fail_at(at, "\"prompt\" must be a string (or a list of messages), got " + type_name(prompt));
    }
    for (const char* key : {"prompt", "completion"}) {
      if (!record.contains(key)) fail_at(at, std::string("has \"prompt\" or \"completion\" but no \"") + key + "\"");
    }
    json& prompt = record["prompt"];
    json& completion = record["completion"];
    if (prompt.is_string() && completion.is_string()) {
      return {{"user", prompt.get<std::string>()}, {"assistant", completion.get<std::string>()}};
    }
    if (prompt.is_array() && completion.is_array()) {
      Conversation conv = turns(prompt, kMessages, "prompt", at);
      for (Turn& t : turns(completion, kMessages, "completion", at)) conv.push_back(std::move(t));
      return conv;
    }
    for (const auto& [key, value] : {std::pair<const char*, const json*>{"prompt", &prompt}, {"completion", &completion}}) {
      if (!value->is_string() && !value->is_array()) {
        fail_at(at, std::string("\"") + key + "\" must be a string (or a list of messages), got " + type_name(*value));
      }
    }
    fail_at(at, "\"prompt\" and \"completion\" must both be strings or both lists of messages, got " +
                    type_name(prompt) + " and " + type_name(completion));
  }

  const DatasetOptions& opt_;
};

// Collects the samples of one file: each record parsed, bad ones skipped or thrown.
class SampleSink {
 public:
  SampleSink(const std::string& path, const DatasetOptions& options, DatasetFileReport& report)
      : parser_(options), skip_(options.skip_bad_samples), report_(report) {
    report_ = DatasetFileReport{};
    report_.path = path;
  }

  void add(const std::string& text, const RecordPlace& at) {
    ++report_.records;
    try {
      bool prompt_completion = false;
      samples_.push_back(parser_.parse(text, at, &prompt_completion));
      report_.prompt_completion.push_back(prompt_completion ? 1 : 0);
    } catch (const DataError& e) {
      if (!skip_) throw;
      ++report_.skipped;
      if (report_.skip_reasons.size() < DatasetFileReport::kReasonsKept) report_.skip_reasons.push_back(e.what());
    }
  }

  std::vector<Conversation> finish() {
    if (report_.records == 0) throw DataError(report_.path + ": no samples");
    if (samples_.empty()) {
      throw DataError(report_.path + ": every one of its " + std::to_string(report_.records) +
                      " records is malformed (skip_bad_samples skips some, not all); the first: " +
                      report_.skip_reasons.front());
    }
    return std::move(samples_);
  }

 private:
  RecordParser parser_;
  bool skip_;
  DatasetFileReport& report_;
  std::vector<Conversation> samples_;
};

[[noreturn]] void fail_open(const std::string& path, int err) {
  throw DataError("cannot open dataset '" + path + "': " + std::strerror(err));
}

// One JSON array of records. The array is split into its elements by a small scanner (strings,
// escapes, nesting), so that each element is parsed on its own and a bad one is reported with its line
// and index like a bad line of a JSONL file, and can be skipped.
void read_json_array(const std::string& path, const std::string& text, std::size_t open_bracket, SampleSink& sink) {
  std::int64_t line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(open_bracket), '\n');
  std::size_t i = open_bracket + 1;
  auto skip_space = [&] {
    for (; i < text.size() && is_space(text[i]); ++i) line += text[i] == '\n';
  };
  skip_space();
  if (i < text.size() && text[i] == ']') {
    ++i;
  } else {
    for (std::int64_t index = 0;; ++index) {
      skip_space();
      const std::size_t start = i;
      const std::int64_t start_line = line;
      int depth = 0;
      bool in_string = false;
      for (; i < text.size(); ++i) {
        const char c = text[i];
        line += c == '\n';
        if (in_string) {
          if (c == '\\') {
            ++i;  // the escaped character never ends the string
          } else if (c == '"') {
            in_string = false;
          }
        } else if (c == '"') {
          in_string = true;
        } else if (c == '{' || c == '[') {
          ++depth;
        } else if (c == '}' || c == ']') {
          if (depth == 0) break;  // the array's own ']'
          --depth;
        } else if (c == ',' && depth == 0) {
          break;
        }
      }
      if (i >= text.size()) {
        throw DataError(path + ":" + std::to_string(start_line) + ": record[" + std::to_string(index) +
                        "]: the JSON array is not closed (no ']' before the end of the file)");
      }
      std::size_t end = i;
      while (end > start && is_space(text[end - 1])) --end;
      sink.add(text.substr(start, end - start), RecordPlace{path, start_line, index});
      if (text[i++] == ']') break;
    }
  }
  skip_space();
  if (i < text.size()) {
    throw DataError(path + ":" + std::to_string(line) + ": unexpected text after the closing ']' of the JSON array");
  }
}

// The records of a dataset file's content, `in` read from its start.
std::vector<Conversation> read_records(const std::string& path, std::istream& in, const DatasetOptions& options,
                                       DatasetFileReport* report) {
  DatasetFileReport local;
  SampleSink sink(path, options, report ? *report : local);

  // Tolerate files saved by editors that add a UTF-8 byte order mark.
  char bom[3] = {0, 0, 0};
  in.read(bom, 3);
  const bool has_bom = in.gcount() == 3 && std::memcmp(bom, "\xEF\xBB\xBF", 3) == 0;
  in.clear();
  in.seekg(has_bom ? 3 : 0);
  // The first non-space character tells a JSON array from JSON Lines.
  char first = 0;
  while (in.get(first) && is_space(first)) {
  }
  const bool is_array = in && first == '[';
  in.clear();
  in.seekg(has_bom ? 3 : 0);

  errno = 0;
  if (is_array) {
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw DataError(path + ": read error: " + std::strerror(errno));
    read_json_array(path, text, text.find('['), sink);
    return sink.finish();
  }
  std::string text;
  std::int64_t line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (is_blank(text)) continue;
    sink.add(text, RecordPlace{path, line});
    if (text.capacity() > (std::size_t{16} << 20)) std::string().swap(text);  // a huge line's buffer goes now
  }
  if (in.bad()) {
    const int err = errno;
    throw DataError(path + ":" + std::to_string(line + 1) + ": read error: " + std::strerror(err));
  }
  return sink.finish();
}

}  // namespace

std::vector<Conversation> read_dataset(const std::string& path, const DatasetOptions& options,
                                       DatasetFileReport* report) {
  // A directory opens fine as a stream and only fails on the first read; reject it up front with the
  // same wording as any other file that cannot be opened.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail_open(path, EISDIR);
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_open(path, errno);
  return read_records(path, in, options, report);
}

std::vector<Conversation> read_dataset_text(const std::string& path, const std::string& text,
                                            const DatasetOptions& options, DatasetFileReport* report) {
  std::istringstream in(text);
  return read_records(path, in, options, report);
}

std::vector<Conversation> read_conversations_jsonl(const std::string& path) { return read_dataset(path, {}); }

MixedDataset mix_datasets(const std::vector<DatasetSpec>& specs, const DatasetOptions& options, std::uint64_t seed) {
  if (specs.empty()) throw DataError("no training dataset given");
  MixedDataset mixed;
  for (std::size_t f = 0; f < specs.size(); ++f) {
    const DatasetSpec& spec = specs[f];
    if (!(spec.weight > 0) || !std::isfinite(spec.weight)) {
      throw DataError(spec.path + ": dataset weight must be a number > 0, got " + format_double(spec.weight));
    }
    MixedDataset::Part part;
    part.spec = spec;
    std::vector<Conversation> file = read_dataset(spec.path, options, &part.file);
    const auto n = static_cast<std::int64_t>(file.size());
    const auto target = static_cast<std::int64_t>(std::llround(static_cast<double>(n) * spec.weight));
    if (target == 0) {
      throw DataError(spec.path + ": weight " + format_double(spec.weight) + " of its " + std::to_string(n) +
                      " samples leaves none in the mixture; raise the weight or drop the file");
    }
    const std::vector<char>& kinds = part.file.prompt_completion;
    for (std::int64_t copy = 0; copy < target / n; ++copy) {
      mixed.samples.insert(mixed.samples.end(), file.begin(), file.end());
      mixed.prompt_completion.insert(mixed.prompt_completion.end(), kinds.begin(), kinds.end());
    }
    if (const std::int64_t rest = target % n; rest > 0) {
      // Negative "epochs" give permutation streams that the epoch shuffles (epochs >= 0) never use.
      std::vector<std::int64_t> pick = epoch_permutation(n, seed, -1 - static_cast<std::int64_t>(f));
      pick.resize(static_cast<std::size_t>(rest));
      std::sort(pick.begin(), pick.end());
      for (std::int64_t i : pick) {
        mixed.samples.push_back(file[static_cast<std::size_t>(i)]);
        mixed.prompt_completion.push_back(kinds[static_cast<std::size_t>(i)]);
      }
    }
    part.used = target;
    mixed.parts.push_back(std::move(part));
  }
  return mixed;
}

std::string describe_skips(const DatasetFileReport& report) {
  if (report.skipped == 0) return "";
  std::ostringstream s;
  s << "  skipped " << report.skipped << " bad record" << (report.skipped > 1 ? "s" : "") << " of " << report.path
    << (report.skipped > static_cast<std::int64_t>(report.skip_reasons.size()) ? "; the first:" : ":") << "\n";
  for (const std::string& reason : report.skip_reasons) s << "    " << reason << "\n";
  return s.str();
}

std::string describe_mixture(const MixedDataset& mixed) {
  std::ostringstream s;
  for (const MixedDataset::Part& p : mixed.parts) {
    s << "dataset " << p.spec.path << ": " << p.file.records << " records, " << p.file.samples() << " samples";
    if (p.file.skipped > 0) s << ", " << p.file.skipped << " skipped";
    s << "; weight " << format_double(p.spec.weight) << " -> " << p.used << " samples\n";
  }
  for (const MixedDataset::Part& p : mixed.parts) s << describe_skips(p.file);
  if (mixed.parts.size() > 1) {
    s << "datasets mixed: " << mixed.samples.size() << " training samples from " << mixed.parts.size() << " files\n";
  }
  return s.str();
}

}  // namespace shardft
