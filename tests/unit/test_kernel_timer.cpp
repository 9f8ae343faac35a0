// SHARDFT_KERNEL_TIMES: every Kokkos kernel is counted under its label, and the time between kernels
// is reported apart.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <string>

#include "kernels/elementwise.hpp"
#include "kernels/kernel_timer.hpp"
#include "kernels/types.hpp"

namespace shardft {
namespace {

TEST(KernelTimer, CountsEachLabelledKernelAndTheGapsBetween) {
  install_kernel_timer();
  View1<float> x(Kokkos::view_alloc(Kokkos::WithoutInitializing, "x"), 4096);
  for (int i = 0; i < 3; ++i) Kokkos::deep_copy(x, 2.f);  // Kokkos's own fill kernel, 3 times
  View1<double> s("s", 1);
  sum_squares(x, s);  // shardft's, labelled sum_squares
  const std::string report = kernel_timer_report();
  uninstall_kernel_timer();
  EXPECT_FALSE(kernel_timer_installed());
  EXPECT_DOUBLE_EQ(sum_squares(x), 4.0 * 4096);
  // "seconds % count mean-us name": the fill ran 3 times, the reduction once.
  const auto count_of = [&](const std::string& name) {
    const std::size_t at = report.find(name);
    if (at == std::string::npos) return -1;
    const std::size_t line = report.rfind('\n', at) + 1;
    double seconds = 0, percent = 0, mean = 0;
    long long count = -1;
    std::sscanf(report.c_str() + line, "%lf %lf %lld %lf", &seconds, &percent, &count, &mean);
    return static_cast<int>(count);
  };
  EXPECT_EQ(count_of("ViewFill-1D"), 3) << report;
  EXPECT_EQ(count_of("sum_squares"), 1) << report;
  EXPECT_NE(report.find("(between "), std::string::npos) << report;  // host time, or the device's idle time
  // Taken off: later kernels are not counted.
  Kokkos::deep_copy(x, 0.f);
  EXPECT_EQ(kernel_timer_report().find("ViewFill"), std::string::npos);
}

// A paused timer keeps its times and counts the launches after it without timing them (a run's export
// after its last step is not step time).
TEST(KernelTimer, PausedKeepsItsTimesAndStillCounts) {
  install_kernel_timer();
  View1<float> x(Kokkos::view_alloc(Kokkos::WithoutInitializing, "x"), 4096);
  Kokkos::deep_copy(x, 1.f);
  pause_kernel_timer();
  const std::int64_t launches = kernel_launches();
  View1<double> s("s", 1);
  sum_squares(x, s);
  const std::int64_t counted = kernel_launches() - launches;
  const std::string report = kernel_timer_report();
  uninstall_kernel_timer();
  EXPECT_NE(report.find("ViewFill-1D"), std::string::npos) << report;
  EXPECT_EQ(report.find("sum_squares"), std::string::npos) << report;
  EXPECT_GE(counted, 1);
}

// HostPhase scopes add their wall time under their name while the timer runs, and nothing when it is off.
TEST(KernelTimer, HostPhasesAreReportedWhileTiming) {
  {
    const HostPhase off("phase while off");
  }
  install_kernel_timer();
  {
    const HostPhase on("phase while timing");
    View1<float> x(Kokkos::view_alloc(Kokkos::WithoutInitializing, "x"), 1024);
    Kokkos::deep_copy(x, 1.f);
  }
  const std::string report = kernel_timer_report();
  uninstall_kernel_timer();
  EXPECT_NE(report.find("host phases"), std::string::npos) << report;
  EXPECT_NE(report.find("phase while timing"), std::string::npos) << report;
  EXPECT_EQ(report.find("phase while off"), std::string::npos) << report;
}

}  // namespace
}  // namespace shardft
