#pragma once
// UTF-8 well-formedness, as text read from a user's files (templates, tokenizer vocabularies, data)
// must be checked before anything interprets it.
#include <cstddef>
#include <string_view>

namespace shardft {

// Length of the well-formed UTF-8 sequence at s[i], or of its longest well-formed prefix negated
// (-1 .. -3: that many bytes form the maximal ill-formed subpart, Unicode's "best practice" that Rust's
// from_utf8_lossy follows).
int utf8_sequence_length(std::string_view s, std::size_t i);
// Offset of the first byte that does not start a well-formed UTF-8 sequence; npos when s is valid.
std::size_t find_invalid_utf8(std::string_view s);

}  // namespace shardft
