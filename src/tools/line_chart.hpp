#pragma once
// A line chart on a Canvas: title, axes with numeric tick labels and grid lines, one or more series
// drawn as lines and/or point markers, and a legend when there is more than one series.
#include <string>
#include <vector>

#include "tools/raster.hpp"

namespace shardft {

struct ChartSeries {
  std::string name;          // in the legend
  std::vector<double> x, y;  // same length; points with a non-finite coordinate are left out
  Rgb color;
  bool line = true;      // join the points
  bool markers = false;  // a disc on each point
};

struct LineChart {
  std::string title;
  std::string subtitle;  // a smaller line under the title; may be empty
  std::string x_label;
  bool integer_x = false;  // x counts something (steps): ticks 1 apart at the least
  std::vector<ChartSeries> series;
  int width = 800, height = 500;
};

// Throws std::invalid_argument when no series has a finite point.
Canvas render_line_chart(const LineChart& chart);

// Ticks at multiples of 1, 2 or 5 times a power of ten, about `target` of them within [lo, hi].
struct AxisTicks {
  double step = 1.0;
  std::vector<double> values;
};
AxisTicks nice_ticks(double lo, double hi, int target);

// The labels of an axis's ticks, with the digits its step needs and one notation for all:
// "0.25", "1200", "12k", "3M"; steps below 1e-3 in scientific notation with the exponent of the
// largest tick ("0.5e-3", "1.0e-3", "1.5e-3").
std::vector<std::string> tick_labels(const AxisTicks& ticks);

// The chart's colours.
namespace chart_colors {
constexpr Rgb background{255, 255, 255};
constexpr Rgb text{34, 34, 34};
constexpr Rgb axis{68, 68, 68};
constexpr Rgb grid{226, 226, 226};
constexpr Rgb blue{31, 119, 180};
constexpr Rgb orange{230, 115, 0};
constexpr Rgb green{44, 160, 44};
}  // namespace chart_colors

}  // namespace shardft
