#pragma once
// An RGB canvas with the few drawing operations plots need: pixels, filled rectangles, thick line
// segments, filled discs and text in the built-in bitmap font (tools/bitmap_font.hpp). Coordinates are
// pixels, x to the right and y down from the top-left corner; whatever falls outside is clipped.
#include <cstdint>
#include <string>
#include <vector>

namespace shardft {

struct Rgb {
  std::uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
  bool operator!=(const Rgb& o) const { return !(*this == o); }
};

class Canvas {
 public:
  Canvas(int width, int height, Rgb background);

  int width() const { return width_; }
  int height() const { return height_; }
  // width*height*3 bytes, rows top to bottom: what encode_png_rgb takes.
  const std::vector<std::uint8_t>& rgb() const { return rgb_; }

  Rgb at(int x, int y) const;
  void set(int x, int y, Rgb c);                          // ignored outside the canvas
  void fill_rect(int x0, int y0, int x1, int y1, Rgb c);  // corners inclusive, any order
  void line(double x0, double y0, double x1, double y1, Rgb c, double thickness = 1.0);
  void disc(double cx, double cy, double radius, Rgb c);
  // Text with its top-left corner at (x, y), each font pixel drawn as scale x scale pixels.
  void text(int x, int y, const std::string& s, Rgb c, int scale = 1);

  static int text_width(const std::string& s, int scale = 1);
  static int text_height(int scale = 1);  // cap height: the rows above the baseline

 private:
  int width_, height_;
  std::vector<std::uint8_t> rgb_;
};

}  // namespace shardft
