#pragma once
// A progress bar on one terminal line, redrawn in place with '\r':
//   train [#########...........]  45% 45/100 steps 00:12<00:15 loss 1.234 tok/s 12.3k
// label, bar, percent, done/total, elapsed<remaining, then the caller's statistics. The text is
// made by render_progress, a pure function of the numbers (tested without a terminal or a clock).
// terminal_progress_bar gives a bar only on a terminal: on stderr where it is one, else on stdout where
// that is one. mpirun forwards a rank's stdout through a pseudo-terminal (its stderr through a pipe) even
// into a log file, so under a launcher stdout counts only where SHARDFT_TERMINAL=1 says the launcher's is
// a terminal (jobs/mpirun.sh sets it). Logs and pipes never see one.
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace shardft {

using ProgressStats = std::vector<std::pair<std::string, std::string>>;  // {"loss", "1.234"}

struct ProgressView {
  std::string label;           // "train", "tokenize"
  long done = 0, total = 0;    // units
  long start = 0;              // units done before this process began (a resumed run): not in the rate
  std::string unit;            // "steps", "samples"
  double elapsed_seconds = 0;  // since this process began
  ProgressStats stats;
};

// The line. With columns > 1 the bar narrows (to 10) to fit in columns - 1 characters (a full line wraps
// on some terminals), and what still does not fit is cut.
std::string render_progress(const ProgressView& v, int columns = 0);
std::string format_duration(double seconds);  // "00:07", "12:03", "1:02:03"; "?" when not finite
std::string format_si(double v);              // "950", "12.3k", "4.56M", "1.20G"
std::string format_stat(double v);            // 4 significant digits: "2.346", "0.0001234"

class ProgressBar {
 public:
  using Clock = std::function<double()>;  // seconds, monotonic; default: std::chrono::steady_clock

  ProgressBar(std::ostream& out, std::string label, long total, std::string unit, long start = 0, int columns = 0,
              Clock clock = {});
  ~ProgressBar();  // ends a drawn, unfinished line, so that what follows starts on a line of its own
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Whether update(done, ...) would draw now: at most every 0.2 s, always for the first and last unit
  // and after clear(). Lets a caller skip building statistics that would not be shown.
  bool due(long done) const;
  // Draws the line when due: '\r', the text, erase to the end of the line.
  void update(long done, const ProgressStats& stats = {});
  // Erases the line, so that a log line written next starts at column 0; the next update draws again.
  void clear();
  // Shows the last state given to update (drawing it unless it is on the line already) and ends the line.
  void finish();

 private:
  void draw();
  std::ostream& out_;
  ProgressView view_;
  int columns_;
  Clock clock_;
  double t0_;
  double last_draw_ = -1.0;  // < 0: draw at the next update
  bool on_screen_ = false;
  bool undrawn_ = false;  // the last update was not drawn
};

// A bar on stderr, as wide as the terminal, when stderr is a terminal (and TERM is not "dumb");
// nullptr otherwise.
std::unique_ptr<ProgressBar> terminal_progress_bar(std::string label, long total, std::string unit, long start = 0);

}  // namespace shardft
