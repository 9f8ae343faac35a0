#pragma once
// Jinja lexing as transformers configures jinja2 for chat templates: trim_blocks (the first newline
// after a block or comment tag is dropped) and lstrip_blocks (spaces and tabs before a block or
// comment tag that starts its line are dropped), `-` on a tag's side strips all whitespace on that side,
// `+` keeps it; newlines are normalised to \n and one trailing newline of the template is dropped
// (jinja2's keep_trailing_newline=False). Comments vanish here; text, `{{ }}` and `{% %}` become tokens.
#include <cstdint>
#include <string>
#include <vector>

namespace shardft::jinja {

struct Position {
  int line = 1, column = 1;  // 1-based; the column counts bytes
};

// "<origin>, line L column C: <message>" as a DataError.
[[noreturn]] void syntax_error(const std::string& origin, Position at, const std::string& message);

struct Token {
  enum class Kind { text, var_begin, var_end, block_begin, block_end, name, string, integer, floating, op, eof };
  Kind kind = Kind::eof;
  std::string text;  // text: the raw text; name; string: the unescaped value; op: "+", "==", "(", ...
  std::int64_t integer = 0;
  double floating = 0;
  Position at;
};

// DataError naming origin, line and column for an unclosed tag, string or bracket, or a stray character.
std::vector<Token> lex(const std::string& source, const std::string& origin);

// How a token is shown in "expected X, got Y" messages.
std::string describe(const Token& token);

}  // namespace shardft::jinja
