#include "io/progress_bar.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace shardft {

namespace {

constexpr int kBarWidth = 20;  // characters between the brackets, at most
constexpr int kMinBarWidth = 10;
constexpr double kRedrawSeconds = 0.2;

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%02ld:%02ld", s / 60, s % 60);
  }
  return buf;
}

std::string format_si(double v) {
  if (!std::isfinite(v)) return "?";
  char buf[32];
  const double a = std::fabs(v);
  if (a < 1e3) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    const char* suffix = a < 1e6 ? "k" : a < 1e9 ? "M" : "G";
    const double scaled = v / (a < 1e6 ? 1e3 : a < 1e9 ? 1e6 : 1e9);
    // Three significant digits: 1.23k, 12.3k, 123k.
    const double sa = std::fabs(scaled);
    std::snprintf(buf, sizeof buf, "%.*f%s", sa < 9.995 ? 2 : sa < 99.95 ? 1 : 0, scaled, suffix);
  }
  return buf;
}

std::string format_stat(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string render_progress(const ProgressView& v, int columns) {
  const double fraction =
      v.total > 0 ? std::clamp(static_cast<double>(v.done) / static_cast<double>(v.total), 0.0, 1.0) : 1.0;
  char percent[8];
  std::snprintf(percent, sizeof percent, "%3d%%", static_cast<int>(fraction * 100.0));
  // The rate counts only what this process did; nothing done yet: no estimate.
  const long done_here = v.done - v.start;
  const double remaining =
      done_here > 0 && v.elapsed_seconds > 0
          ? v.elapsed_seconds / static_cast<double>(done_here) * static_cast<double>(std::max(0L, v.total - v.done))
          : std::nan("");

  const std::string head = v.label.empty() ? "" : v.label + " ";
  // done as wide as total, so that the bar keeps its width while the count grows.
  const std::string total = std::to_string(v.total), done = std::to_string(v.done);
  std::string tail = std::string("] ") + percent + " " +
                     std::string(total.size() - std::min(total.size(), done.size()), ' ') + done + "/" + total +
                     (v.unit.empty() ? "" : " " + v.unit) + " " + format_duration(v.elapsed_seconds) + "<" +
                     format_duration(remaining);
  for (const auto& [name, value] : v.stats) tail += " " + name + " " + value;
  // The bar takes what the terminal leaves, within [kMinBarWidth, kBarWidth]; past that the line is cut.
  int width = kBarWidth;
  if (columns > 1) {
    width = std::clamp(columns - 1 - static_cast<int>(head.size() + 1 + tail.size()), kMinBarWidth, kBarWidth);
  }
  const int filled = static_cast<int>(fraction * width);
  std::string line = head + "[" + std::string(filled, '#') + std::string(width - filled, '.') + tail;
  if (columns > 1 && static_cast<int>(line.size()) > columns - 1) line.resize(columns - 1);
  return line;
}

ProgressBar::ProgressBar(std::ostream& out, std::string label, long total, std::string unit, long start, int columns,
                         Clock clock)
    : out_(out), columns_(columns), clock_(clock ? std::move(clock) : Clock(steady_seconds)), t0_(clock_()) {
  view_.label = std::move(label);
  view_.total = total;
  view_.unit = std::move(unit);
  view_.start = start;
  view_.done = start;
}

ProgressBar::~ProgressBar() {
  if (on_screen_) out_ << "\n" << std::flush;
}

bool ProgressBar::due(long done) const {
  return last_draw_ < 0 || done >= view_.total || clock_() - last_draw_ >= kRedrawSeconds;
}

void ProgressBar::update(long done, const ProgressStats& stats) {
  const bool draw_now = due(done);
  view_.done = done;
  view_.stats = stats;
  if (draw_now) {
    draw();
  } else {
    undrawn_ = true;
  }
}

void ProgressBar::draw() {
  const double now = clock_();
  view_.elapsed_seconds = now - t0_;
  last_draw_ = now;
  undrawn_ = false;
  out_ << "\r" << render_progress(view_, columns_) << "\033[K" << std::flush;
  on_screen_ = true;
}

void ProgressBar::clear() {
  if (on_screen_) out_ << "\r\033[K" << std::flush;
  on_screen_ = false;
  last_draw_ = -1.0;
}

void ProgressBar::finish() {
  if (!on_screen_ || undrawn_) draw();
  out_ << "\n" << std::flush;
  on_screen_ = false;
}

namespace {
// Under an MPI or SLURM launcher a rank's stdout is a pseudo-terminal whatever the launcher's own stdout
// is, a log file included: there stdout counts as a terminal only when the launcher says its own is one
// (SHARDFT_TERMINAL=1, which jobs/mpirun.sh passes on).
// Read when the process starts: MPI_Init of a process started alone sets the same variables.
const bool kStartedByLauncher = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
                                std::getenv("PMI_RANK") != nullptr || std::getenv("SLURM_PROCID") != nullptr;

bool stdout_is_a_terminal() {
  if (!isatty(STDOUT_FILENO)) return false;
  const char* said = std::getenv("SHARDFT_TERMINAL");
  return !kStartedByLauncher || (said != nullptr && std::string(said) == "1");
}
}  // namespace

std::unique_ptr<ProgressBar> terminal_progress_bar(std::string label, long total, std::string unit, long start) {
  const char* term = std::getenv("TERM");
  if (term && std::string(term) == "dumb") return nullptr;
  for (const int fd : {STDERR_FILENO, STDOUT_FILENO}) {
    if (fd == STDERR_FILENO ? !isatty(fd) : !stdout_is_a_terminal()) continue;
    winsize ws{};
    const int columns = ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
    return std::make_unique<ProgressBar>(fd == STDERR_FILENO ? std::cerr : std::cout, std::move(label), total,
                                         std::move(unit), start, columns);
  }
  return nullptr;
}

}  // namespace shardft
