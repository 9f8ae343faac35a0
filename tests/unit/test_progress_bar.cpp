// The progress bar's text from given numbers, and its redraw policy under a fake clock.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "io/progress_bar.hpp"

namespace shardft {
namespace {

TEST(ProgressBar, RendersTheNumbers) {
  ProgressView v;
  v.label = "train";
  v.done = 45;
  v.total = 100;
  v.unit = "steps";
  v.elapsed_seconds = 12.0;
  v.stats = {{"loss", format_stat(1.23456)}, {"tok/s", format_si(12345)}};
  EXPECT_EQ(render_progress(v), "train [#########...........]  45%  45/100 steps 00:12<00:15 loss 1.235 tok/s 12.3k");
  // Resumed at 40: the rate counts the 5 steps this process made.
  v.start = 40;
  EXPECT_EQ(render_progress(v), "train [#########...........]  45%  45/100 steps 00:12<02:12 loss 1.235 tok/s 12.3k");
  // Nothing done yet: no estimate. Done: a full bar.
  v.done = 40;
  EXPECT_EQ(render_progress(v), "train [########............]  40%  40/100 steps 00:12<? loss 1.235 tok/s 12.3k");
  v.done = 100;
  v.stats.clear();
  EXPECT_EQ(render_progress(v), "train [####################] 100% 100/100 steps 00:12<00:00");
  // Within the terminal's width less one column: a narrower bar, then a cut.
  EXPECT_EQ(render_progress(v, 55), "train [###############] 100% 100/100 steps 00:12<00:00");
  EXPECT_EQ(render_progress(v, 200), render_progress(v));
  EXPECT_EQ(render_progress(v, 21), "train [##########] 1");
}

TEST(ProgressBar, Formats) {
  EXPECT_EQ(format_duration(7.4), "00:07");
  EXPECT_EQ(format_duration(723), "12:03");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(std::nan("")), "?");
  EXPECT_EQ(format_si(950), "950");
  EXPECT_EQ(format_si(1234), "1.23k");
  EXPECT_EQ(format_si(12345), "12.3k");
  EXPECT_EQ(format_si(123456), "123k");
  EXPECT_EQ(format_si(4.56e6), "4.56M");
  EXPECT_EQ(format_si(1.2e9), "1.20G");
  EXPECT_EQ(format_stat(2.3456), "2.346");
  EXPECT_EQ(format_stat(0.00012345), "0.0001234");
}

TEST(ProgressBar, RedrawsInPlaceAtMostFiveTimesASecond) {
  std::ostringstream out;
  double now = 100.0;
  {
    ProgressBar bar(out, "tokenize", 10, "samples", 0, 0, [&] { return now; });
    bar.update(1);  // the first update draws
    EXPECT_EQ(out.str(), "\rtokenize [##..................]  10%  1/10 samples 00:00<?\033[K");
    out.str("");
    now += 0.1;
    EXPECT_FALSE(bar.due(2));
    bar.update(2);
    EXPECT_EQ(out.str(), "");  // too soon
    now += 0.15;
    bar.update(3);
    EXPECT_EQ(out.str(), "\rtokenize [######..............]  30%  3/10 samples 00:00<00:01\033[K");
    out.str("");
    bar.clear();  // before a log line
    EXPECT_EQ(out.str(), "\r\033[K");
    out.str("");
    EXPECT_TRUE(bar.due(4));               // drawn again at once after a clear
    bar.update(10, {{"tokens", "1.2k"}});  // the last unit always draws
    EXPECT_NE(out.str().find("100% 10/10 samples"), std::string::npos);
    EXPECT_NE(out.str().find("tokens 1.2k"), std::string::npos);
    out.str("");
    bar.finish();
    EXPECT_EQ(out.str(), "\n");  // the last state is on the line already
    out.str("");
  }
  EXPECT_EQ(out.str(), "");  // finished: the destructor writes nothing
  {
    ProgressBar bar(out, "train", 5, "steps", 0, 0, [&] { return now; });
    bar.update(1);
    bar.update(2);  // too soon to draw
    out.str("");
    bar.finish();  // draws step 2, then ends the line
    EXPECT_EQ(out.str(), "\rtrain [########............]  40% 2/5 steps 00:00<?\033[K\n");
    out.str("");
    now += 1.0;
    bar.update(3);
  }
  EXPECT_EQ(out.str().back(), '\n');  // an unfinished bar ends its line
}

}  // namespace
}  // namespace shardft
