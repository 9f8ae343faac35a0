// Reader for the conversational JSONL formats trl accepts:
//   {"conversations":[{"from":"human","value":"..."},{"from":"gpt","value":"..."}]}   (ShareGPT)
//   {"messages":[{"role":"user","content":"..."},{"role":"assistant","content":"..."}]}
//   {"prompt":"...","completion":"..."}                 (a user turn, then the assistant's)
// Extra columns are ignored.
// Every rejection names the file and the 1-based line, so a user can jump straight to the bad record.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/sft_data.hpp"

namespace shardft {
namespace {

using nlohmann::json;

[[noreturn]] void fail_at(const std::string& path, std::int64_t line, const std::string& reason) {
  throw DataError(path + ":" + std::to_string(line) + ": " + reason);
}

// Human-readable JSON type name for "expected X, got Y" messages.
std::string type_name(const json& value) { return value.type_name(); }

// trl / ShareGPT role names onto the three roles the chat template knows; empty when unknown.
std::string map_role(const std::string& from) {
  if (from == "human" || from == "user") return "user";
  if (from == "gpt" || from == "assistant") return "assistant";
  if (from == "system") return "system";
  return {};
}

bool is_blank(const std::string& line) {
  return line.find_first_not_of(" \t\r\n\f\v") == std::string::npos;
}

// nlohmann's what() reads "[json.exception.parse_error.101] parse error at line 1, column 5: <why>".
// The exception id and the "line 1" (always 1: we parse one line at a time) only add noise, so keep
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

// The field names of a turn: ShareGPT's from/value or the messages format's role/content.
struct TurnFields {
  const char* list;
  const char* role;
  const char* text;
};
constexpr TurnFields kShareGpt{"conversations", "from", "value"};
constexpr TurnFields kMessages{"messages", "role", "content"};

Turn parse_turn(const json& turn, std::size_t index, const std::string& path, std::int64_t line,
                const TurnFields& f = kShareGpt) {
  const std::string where = std::string(f.list) + "[" + std::to_string(index) + "]";
  if (!turn.is_object()) fail_at(path, line, where + " must be an object, got " + type_name(turn));
  auto from = turn.find(f.role);
  if (from == turn.end()) fail_at(path, line, where + " has no \"" + f.role + "\"");
  if (!from->is_string()) fail_at(path, line, where + "." + f.role + " must be a string, got " + type_name(*from));
  auto value = turn.find(f.text);
  if (value == turn.end()) fail_at(path, line, where + " has no \"" + f.text + "\"");
  if (!value->is_string()) fail_at(path, line, where + "." + f.text + " must be a string, got " + type_name(*value));

  const std::string raw_role = from->get<std::string>();
  Turn out;
  out.role = map_role(raw_role);
  if (out.role.empty()) {
    fail_at(path, line, where + " has unknown role \"" + raw_role +
                            "\" (expected human, gpt, system, user or assistant)");
  }
  out.content = value->get<std::string>();
  return out;
}

Conversation parse_record(const std::string& text, const std::string& path, std::int64_t line) {
  json record;
  try {
    record = json::parse(text);
  } catch (const json::parse_error& e) {
    fail_at(path, line, "not valid JSON (" + brief_parse_reason(e) + ")");
  }
  if (!record.is_object()) fail_at(path, line, "expected a JSON object, got " + type_name(record));
  if (record.contains("prompt") || record.contains("completion")) {
    for (const char* key : {"prompt", "completion"}) {
      if (!record.contains(key)) fail_at(path, line, std::string("has \"prompt\" or \"completion\" but no \"") + key + "\"");
      if (!record[key].is_string()) {
        fail_at(path, line, std::string("\"") + key + "\" must be a string, got " + type_name(record[key]));
      }
    }
    return {{"user", record["prompt"].get<std::string>()}, {"assistant", record["completion"].get<std::string>()}};
  }
  const TurnFields& f = record.contains("conversations") || !record.contains("messages") ? kShareGpt : kMessages;
  auto turns = record.find(f.list);
  if (turns == record.end()) {
    fail_at(path, line, "missing \"conversations\" (or \"messages\", or \"prompt\" and \"completion\")");
  }
  if (!turns->is_array()) fail_at(path, line, "\"" + std::string(f.list) + "\" must be an array, got " + type_name(*turns));
  if (turns->empty()) fail_at(path, line, "empty conversation");

  Conversation conv;
  conv.reserve(turns->size());
  bool has_assistant = false;
  for (std::size_t i = 0; i < turns->size(); ++i) {
    conv.push_back(parse_turn((*turns)[i], i, path, line, f));
    has_assistant = has_assistant || conv.back().role == "assistant";
  }
  // A sample without an assistant turn has no target tokens: it would cost compute and teach nothing.
  if (!has_assistant) fail_at(path, line, "conversation has no assistant (gpt) turn");
  return conv;
}

}  // namespace

std::vector<Conversation> read_conversations_jsonl(const std::string& path) {
  // A directory opens fine as a stream and only fails on the first read; reject it up front with the
  // same wording as any other file that cannot be opened.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw DataError("cannot open dataset '" + path + "': " + std::strerror(EISDIR));
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    throw DataError("cannot open dataset '" + path + "': " + std::strerror(err));
  }

  std::vector<Conversation> samples;
  std::string text;
  std::int64_t line = 0;
  errno = 0;
  while (std::getline(in, text)) {
    ++line;
    // Tolerate files saved by editors that add a UTF-8 byte order mark.
    if (line == 1 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
    if (is_blank(text)) continue;
    samples.push_back(parse_record(text, path, line));
  }
  if (in.bad()) {
    const int err = errno;
    throw DataError(path + ":" + std::to_string(line + 1) + ": read error: " + std::strerror(err));
  }
  if (samples.empty()) throw DataError(path + ": no samples");
  return samples;
}

}  // namespace shardft
