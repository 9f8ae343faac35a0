#include "tools/line_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace shardft {

namespace {

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
};

// The data's range, widened by `pad` of its span on each side; a flat range gets a span of its own.
Range padded(Range r, double pad) {
  const double magnitude = std::max(std::fabs(r.lo), std::fabs(r.hi));
  if (r.hi - r.lo <= 1e-9 * magnitude) {
    const double half = magnitude > 0 ? 0.1 * magnitude : 1.0;
    const double mid = 0.5 * (r.lo + r.hi);
    return {mid - half, mid + half};
  }
  const double span = r.hi - r.lo;
  return {r.lo - pad * span, r.hi + pad * span};
}

bool finite_point(const ChartSeries& s, std::size_t i) { return std::isfinite(s.x[i]) && std::isfinite(s.y[i]); }

}  // namespace

AxisTicks nice_ticks(double lo, double hi, int target) {
  AxisTicks t;
  if (!(hi > lo) || target < 1) return t;
  const double raw = (hi - lo) / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  t.step = (norm < 1.5 ? 1.0 : norm < 3.0 ? 2.0 : norm < 7.0 ? 5.0 : 10.0) * magnitude;
  for (double k = std::ceil(lo / t.step - 1e-9); k <= std::floor(hi / t.step + 1e-9); k += 1.0) {
    const double v = k * t.step;
    t.values.push_back(std::fabs(v) < 1e-9 * t.step ? 0.0 : v);
  }
  return t;
}

std::vector<std::string> tick_labels(const AxisTicks& ticks) {
  const double step = ticks.step;
  const auto decimals_for = [](double s) { return std::max(0, static_cast<int>(-std::floor(std::log10(s) + 1e-9))); };
  double largest = 0;
  for (double v : ticks.values) largest = std::max(largest, std::fabs(v));
  // Scientific: every label with the exponent of the largest, as many mantissa digits as the step reaches.
  const int e = largest > 0 ? static_cast<int>(std::floor(std::log10(largest) + 1e-9)) : 0;
  const int sci_decimals = std::clamp(e - static_cast<int>(std::floor(std::log10(step) + 1e-9)), 0, 4);
  std::vector<std::string> labels;
  for (double v : ticks.values) {
    char buf[48];
    if (v == 0.0) {
      std::snprintf(buf, sizeof buf, "0");
    } else if (step < 1e-3) {
      std::snprintf(buf, sizeof buf, "%.*fe%d", sci_decimals, v / std::pow(10.0, e), e);
    } else if (step >= 1e6) {
      std::snprintf(buf, sizeof buf, "%.*fM", decimals_for(step / 1e6), v / 1e6);
    } else if (step >= 1e3) {
      std::snprintf(buf, sizeof buf, "%.*fk", decimals_for(step / 1e3), v / 1e3);
    } else {
      std::snprintf(buf, sizeof buf, "%.*f", decimals_for(step), v);
    }
    labels.push_back(buf);
  }
  return labels;
}

namespace {

// Where data lands on the canvas: the plot area [left, right] x [top, bottom] and the ranges it spans.
struct PlotArea {
  int left = 0, right = 0, top = 0, bottom = 0;
  Range xr, yr;
  double px(double x) const { return left + (x - xr.lo) / (xr.hi - xr.lo) * (right - left); }
  double py(double y) const { return bottom - (y - yr.lo) / (yr.hi - yr.lo) * (bottom - top); }
};

constexpr int kTitleScale = 2, kGap = 8;

// The ranges of every finite point, padded; an integer x axis spans at least two units.
void data_ranges(const LineChart& chart, Range& xr, Range& yr) {
  for (const ChartSeries& s : chart.series) {
    if (s.x.size() != s.y.size())
      throw std::invalid_argument("chart series '" + s.name + "': x and y differ in length");
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!finite_point(s, i)) continue;
      xr.add(s.x[i]);
      yr.add(s.y[i]);
    }
  }
  if (xr.empty()) throw std::invalid_argument("chart '" + chart.title + "': no data");
  if (chart.integer_x && xr.hi - xr.lo < 2.0) xr = {xr.lo - 1.0, xr.hi + 1.0};
  xr = padded(xr, 0.02);
  yr = padded(yr, 0.06);
}

// Title and subtitle, the grid and ticks with their labels, then the frame over them and the x label.
void draw_axes(Canvas& cv, const LineChart& chart, const PlotArea& a, const AxisTicks& xt, const AxisTicks& yt) {
  namespace c = chart_colors;
  const int th = Canvas::text_height(1);
  cv.text((chart.width - Canvas::text_width(chart.title, kTitleScale)) / 2, 16, chart.title, c::text, kTitleScale);
  if (!chart.subtitle.empty()) {
    cv.text((chart.width - Canvas::text_width(chart.subtitle)) / 2, 16 + Canvas::text_height(kTitleScale) + kGap,
            chart.subtitle, c::axis);
  }
  const std::vector<std::string> ylabels = tick_labels(yt), xlabels = tick_labels(xt);
  for (std::size_t i = 0; i < yt.values.size(); ++i) {
    const int y = static_cast<int>(std::lround(a.py(yt.values[i])));
    cv.fill_rect(a.left + 1, y, a.right - 1, y, c::grid);
    cv.fill_rect(a.left - 4, y, a.left, y, c::axis);
    cv.text(a.left - kGap - Canvas::text_width(ylabels[i]), y - th / 2, ylabels[i], c::text);
  }
  for (std::size_t i = 0; i < xt.values.size(); ++i) {
    const int x = static_cast<int>(std::lround(a.px(xt.values[i])));
    const std::string& label = xlabels[i];
    cv.fill_rect(x, a.top + 1, x, a.bottom - 1, c::grid);
    cv.fill_rect(x, a.bottom, x, a.bottom + 4, c::axis);
    cv.text(x - Canvas::text_width(label) / 2, a.bottom + kGap, label, c::text);
  }
  cv.fill_rect(a.left, a.top, a.right, a.top, c::axis);
  cv.fill_rect(a.left, a.bottom, a.right, a.bottom, c::axis);
  cv.fill_rect(a.left, a.top, a.left, a.bottom, c::axis);
  cv.fill_rect(a.right, a.top, a.right, a.bottom, c::axis);
  if (!chart.x_label.empty()) {
    cv.text((a.left + a.right - Canvas::text_width(chart.x_label)) / 2, a.bottom + kGap + th + kGap, chart.x_label,
            c::text);
  }
}

// Each series' line (broken where a point is not finite) and markers.
void draw_series(Canvas& cv, const LineChart& chart, const PlotArea& a) {
  for (const ChartSeries& s : chart.series) {
    bool have_prev = false;
    double prev_x = 0, prev_y = 0;
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!finite_point(s, i)) {
        have_prev = false;  // a gap in the line
        continue;
      }
      const double x = a.px(s.x[i]), y = a.py(s.y[i]);
      if (s.line && have_prev) cv.line(prev_x, prev_y, x, y, s.color, 2.0);
      if (s.markers) cv.disc(x, y, 3.5, s.color);
      have_prev = true;
      prev_x = x, prev_y = y;
    }
  }
}

// With more than one series: the legend in the top-right corner of the plot area.
void draw_legend(Canvas& cv, const LineChart& chart, const PlotArea& a) {
  namespace c = chart_colors;
  if (chart.series.size() <= 1) return;
  const int th = Canvas::text_height(1);
  int widest = 0;
  for (const ChartSeries& s : chart.series) widest = std::max(widest, Canvas::text_width(s.name));
  const int row = th + 8, box_w = 28 + kGap + widest + 2 * kGap;
  const int x0 = a.right - 10 - box_w, y0 = a.top + 10;
  const int box_h = static_cast<int>(chart.series.size()) * row + kGap;
  cv.fill_rect(x0, y0, x0 + box_w, y0 + box_h, c::background);
  cv.fill_rect(x0, y0, x0 + box_w, y0, c::grid);
  cv.fill_rect(x0, y0 + box_h, x0 + box_w, y0 + box_h, c::grid);
  cv.fill_rect(x0, y0, x0, y0 + box_h, c::grid);
  cv.fill_rect(x0 + box_w, y0, x0 + box_w, y0 + box_h, c::grid);
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    const ChartSeries& s = chart.series[i];
    const int ym = y0 + kGap + static_cast<int>(i) * row + th / 2;
    if (s.line) cv.line(x0 + kGap, ym, x0 + kGap + 28, ym, s.color, 2.0);
    if (s.markers) cv.disc(x0 + kGap + 14, ym, 3.5, s.color);
    cv.text(x0 + kGap + 28 + kGap, ym - th / 2, s.name, c::text);
  }
}

}  // namespace

Canvas render_line_chart(const LineChart& chart) {
  PlotArea a;
  data_ranges(chart, a.xr, a.yr);
  AxisTicks xt = nice_ticks(a.xr.lo, a.xr.hi, 8);
  if (chart.integer_x && xt.step < 1.0) xt = nice_ticks(a.xr.lo, a.xr.hi, static_cast<int>(a.xr.hi - a.xr.lo));
  const AxisTicks yt = nice_ticks(a.yr.lo, a.yr.hi, 6);

  const int th = Canvas::text_height(1);
  int ylabel_width = 0;
  for (const std::string& l : tick_labels(yt)) ylabel_width = std::max(ylabel_width, Canvas::text_width(l));
  a.top = 16 + Canvas::text_height(kTitleScale) + (chart.subtitle.empty() ? 0 : kGap + th) + 16;
  a.left = 16 + ylabel_width + kGap;
  a.right = chart.width - 24;
  a.bottom = chart.height - 16 - (chart.x_label.empty() ? 0 : th + kGap) - th - kGap;
  if (a.right - a.left < 40 || a.bottom - a.top < 40) throw std::invalid_argument("chart '" + chart.title + "': too small");

  Canvas cv(chart.width, chart.height, chart_colors::background);
  draw_axes(cv, chart, a, xt, yt);
  draw_series(cv, chart, a);
  draw_legend(cv, chart, a);
  return cv;
}

}  // namespace shardft
