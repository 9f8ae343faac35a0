#pragma once
// A 5x7 pixel font (9 rows with the descenders of g, j, p, q, y) for the labels of the plots:
// ASCII letters, digits and the usual punctuation. One pixel of space separates glyphs.
#include <array>
#include <cstdint>

namespace shardft {

constexpr int kGlyphWidth = 5;    // pixels
constexpr int kGlyphHeight = 9;   // rows 0-6 for capitals and digits, 7-8 for descenders
constexpr int kGlyphAdvance = 6;  // from one glyph's left edge to the next
constexpr int kGlyphCapHeight = 7;

// The rows of a character's glyph, top first; bit 4 is the leftmost column. Characters without a glyph
// get '?'.
const std::array<std::uint8_t, kGlyphHeight>& glyph(char c);

}  // namespace shardft
