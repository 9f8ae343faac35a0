// The PNG writer read back by an independent checker (tests/unit/png_check.hpp: signature, IHDR, each
// chunk's CRC-32, IEND, the IDAT inflated with zlib and compared pixel for pixel with the canvas), the
// rasterizer, and the line chart's ticks and labels.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "tools/bitmap_font.hpp"
#include "tools/line_chart.hpp"
#include "io/png.hpp"
#include "tools/raster.hpp"
#include "png_check.hpp"

namespace shardft {
namespace {
namespace fs = std::filesystem;
using namespace testing_png;

TEST(Png, Crc32CheckValue) {
  const char* s = "123456789";
  EXPECT_EQ(crc32_bitwise(reinterpret_cast<const std::uint8_t*>(s), 9), 0xcbf43926u);
}

TEST(Png, EncodesWhatWasDrawn) {
  Canvas cv(37, 23, Rgb{250, 250, 250});
  cv.line(2, 3, 34, 19, Rgb{200, 10, 30}, 2.0);
  cv.fill_rect(30, 1, 35, 4, Rgb{0, 128, 255});
  cv.text(1, 12, "1e-5", Rgb{0, 0, 0});
  cv.set(36, 22, Rgb{1, 2, 3});  // the last pixel
  const std::vector<std::uint8_t> png = encode_png_rgb(cv.width(), cv.height(), cv.rgb());
  const DecodedPng d = check_and_decode(png);
  EXPECT_EQ(d.width, 37);
  EXPECT_EQ(d.height, 23);
  EXPECT_EQ(d.chunk_types, (std::vector<std::string>{"IHDR", "IDAT", "IEND"}));
  EXPECT_EQ(d.rgb, cv.rgb());
  EXPECT_EQ(d.rgb[d.rgb.size() - 3], 1);
}

TEST(Png, WritesTheFileAndRejectsWrongSizes) {
  const fs::path path = fs::temp_directory_path() / ("shardft_png_" + std::to_string(::getpid()) + ".png");
  Canvas cv(5, 4, Rgb{10, 20, 30});
  write_png_rgb(path.string(), cv.width(), cv.height(), cv.rgb());
  std::ifstream f(path, std::ios::binary);
  const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(check_and_decode(bytes).rgb, cv.rgb());
  fs::remove(path);
  EXPECT_THROW(encode_png_rgb(5, 4, std::vector<std::uint8_t>(59)), std::invalid_argument);
  EXPECT_THROW(encode_png_rgb(0, 4, {}), std::invalid_argument);
  EXPECT_THROW(write_png_rgb("/nonexistent-dir/x.png", 5, 4, cv.rgb()), std::runtime_error);
}

TEST(Raster, LinesDiscsTextAndClipping) {
  const Rgb bg{255, 255, 255}, ink{0, 0, 0};
  Canvas cv(40, 20, bg);
  cv.line(0.5, 10.5, 39.5, 10.5, ink, 1.0);
  for (int x = 0; x < 40; ++x) EXPECT_EQ(cv.at(x, 10), ink) << x;
  EXPECT_EQ(cv.at(5, 5), bg);
  cv.line(-100, -100, 200, 200, ink, 3.0);  // clipped, no crash
  cv.disc(-5, -5, 50, ink);
  Canvas t(20, 12, bg);
  t.text(0, 0, "1", ink);
  // Each lit bit of the glyph of '1' is a black pixel, each other one white; its stem is the middle column.
  const auto& g = glyph('1');
  for (int row = 0; row < kGlyphHeight; ++row) {
    for (int col = 0; col < kGlyphWidth; ++col) {
      EXPECT_EQ(t.at(col, row) == ink, ((g[row] >> (kGlyphWidth - 1 - col)) & 1) != 0) << row << "," << col;
    }
  }
  for (int row = 0; row < 7; ++row) EXPECT_EQ(t.at(2, row), ink);
  EXPECT_EQ(glyph('\x01'), glyph('?'));
  EXPECT_EQ(Canvas::text_width("ab", 2), 22);
}

TEST(LineChart, TicksAndLabels) {
  const AxisTicks t = nice_ticks(0.0, 1.0, 5);
  EXPECT_DOUBLE_EQ(t.step, 0.2);
  ASSERT_EQ(t.values.size(), 6u);
  EXPECT_DOUBLE_EQ(t.values[3], 0.6000000000000001);
  const AxisTicks lr = nice_ticks(-1e-6, 2.1e-5, 6);
  EXPECT_DOUBLE_EQ(lr.step, 5e-6);
  EXPECT_EQ(lr.values.front(), 0.0);
  EXPECT_EQ(tick_labels(lr), (std::vector<std::string>{"0", "0.5e-5", "1.0e-5", "1.5e-5", "2.0e-5"}));
  EXPECT_EQ(tick_labels(nice_ticks(-0.01, 1.01, 5)),
            (std::vector<std::string>{"0", "0.2", "0.4", "0.6", "0.8", "1.0"}));
  EXPECT_EQ(tick_labels(nice_ticks(-0.6, 0.3, 4)), (std::vector<std::string>{"-0.6", "-0.4", "-0.2", "0", "0.2"}));
  EXPECT_EQ(tick_labels(nice_ticks(0.2, 0.31, 2)), (std::vector<std::string>{"0.20", "0.25", "0.30"}));
  EXPECT_EQ(tick_labels(nice_ticks(9000, 17000, 4)), (std::vector<std::string>{"10k", "12k", "14k", "16k"}));
  EXPECT_EQ(tick_labels(nice_ticks(11900, 13100, 3)), (std::vector<std::string>{"12000", "12500", "13000"}));
  EXPECT_EQ(tick_labels(nice_ticks(0, 3.5e6, 3)), (std::vector<std::string>{"0", "1M", "2M", "3M"}));
  EXPECT_EQ(tick_labels(nice_ticks(0.5, 120, 8)).back(), "120");
}

TEST(LineChart, DrawsTheSeriesInItsColour) {
  LineChart chart;
  chart.title = "loss";
  chart.x_label = "step";
  ChartSeries s;
  s.name = "loss";
  s.color = chart_colors::blue;
  s.x = {1, 2, 3, 4};
  s.y = {4.0, 3.0, 2.5, 2.25};
  chart.series.push_back(s);
  const Canvas cv = render_line_chart(chart);
  EXPECT_EQ(cv.width(), 800);
  long blue = 0, dark = 0;
  for (int y = 0; y < cv.height(); ++y) {
    for (int x = 0; x < cv.width(); ++x) {
      blue += cv.at(x, y) == chart_colors::blue;
      dark += cv.at(x, y) == chart_colors::text;
    }
  }
  EXPECT_GT(blue, 500);  // a 2-pixel line across most of the width
  EXPECT_GT(dark, 100);  // title and tick labels
  // A single point or a flat series still has a range to draw in.
  chart.series[0].x = {5};
  chart.series[0].y = {2e-5};
  EXPECT_NO_THROW(render_line_chart(chart));
  chart.series[0].x = {};
  chart.series[0].y = {};
  EXPECT_THROW(render_line_chart(chart), std::invalid_argument);
}

}  // namespace
}  // namespace shardft
