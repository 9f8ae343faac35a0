#pragma once
// Shared helpers for the kernel tests (tests/unit/test_kernels_*.cpp): seeded random data,
// host <-> device copies that work for any memory space, central finite differences of a scalar
// loss evaluated in double, and the gradient comparison every backward check uses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/types.hpp"

namespace shardft {
namespace kernel_test {

// Uniform values in [lo, hi) from a fixed seed: every run sees the same data.
inline std::vector<float> random_vector(std::size_t n, std::uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

template <class T>
View1<T> to_device(const std::vector<T>& host, const std::string& label = "test1") {
  View1<T> d(Kokkos::ViewAllocateWithoutInitializing(label), host.size());
  auto m = Kokkos::create_mirror_view(d);
  for (std::size_t i = 0; i < host.size(); ++i) m(i) = host[i];
  Kokkos::deep_copy(d, m);
  return d;
}

inline View2<float> to_device(const std::vector<float>& host, std::size_t rows, std::size_t cols,
                              const std::string& label = "test2") {
  EXPECT_EQ(host.size(), rows * cols) << label;
  View2<float> d(Kokkos::ViewAllocateWithoutInitializing(label), rows, cols);
  auto m = Kokkos::create_mirror_view(d);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) m(r, c) = host[r * cols + c];
  Kokkos::deep_copy(d, m);
  return d;
}

template <class T, class... P>
std::vector<std::remove_const_t<T>> to_host(const Kokkos::View<T*, P...>& d) {
  auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d);
  std::vector<std::remove_const_t<T>> out(m.extent(0));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = m(i);
  return out;
}

template <class T, class... P>
std::vector<std::remove_const_t<T>> to_host(const Kokkos::View<T**, P...>& d) {
  auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d);
  std::vector<std::remove_const_t<T>> out(m.extent(0) * m.extent(1));
  for (std::size_t r = 0; r < m.extent(0); ++r)
    for (std::size_t c = 0; c < m.extent(1); ++c) out[r * m.extent(1) + c] = m(r, c);
  return out;
}

// L = sum_i out[i] * weight[i], accumulated in double: dL/dout = weight.
inline double weighted_sum(const std::vector<float>& out, const std::vector<float>& weight) {
  EXPECT_EQ(out.size(), weight.size());
  double s = 0.0;
  for (std::size_t i = 0; i < out.size() && i < weight.size(); ++i) s += static_cast<double>(out[i]) * weight[i];
  return s;
}

// Short scientific notation for the test properties the error figures are recorded in.
inline std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", v);
  return buf;
}

using ScalarLoss = std::function<double(const std::vector<float>&)>;

// Central differences (L(x + h e_i) - L(x - h e_i)) / (x_i^+ - x_i^-) for every element, where
// x_i^+ and x_i^- are the fp32 values actually reached (so the step's own rounding does not count).
// steps[i] is the step for element i (inputs of very different scales need different steps).
inline std::vector<double> numeric_gradient(const std::vector<float>& x0, const ScalarLoss& loss,
                                           const std::vector<float>& steps) {
  EXPECT_EQ(steps.size(), x0.size());
  std::vector<float> x = x0;
  std::vector<double> grad(x0.size());
  for (std::size_t i = 0; i < x0.size() && i < steps.size(); ++i) {
    x[i] = x0[i] + steps[i];
    const double up = x[i];
    const double loss_up = loss(x);
    x[i] = x0[i] - steps[i];
    const double down = x[i];
    const double loss_down = loss(x);
    x[i] = x0[i];
    grad[i] = (loss_up - loss_down) / (up - down);
  }
  return grad;
}

inline std::vector<double> numeric_gradient(const std::vector<float>& x0, const ScalarLoss& loss, float h) {
  return numeric_gradient(x0, loss, std::vector<float>(x0.size(), h));
}

struct GradientError {
  double rel_norm = 0.0;   // ||a - n|| / ||n||
  double max_abs = 0.0;    // max_i |a_i - n_i|
  double numeric_inf = 0.0;  // max_i |n_i|, the scale the per-element check uses
};

inline GradientError gradient_error(const std::vector<float>& analytic, const std::vector<double>& numeric) {
  GradientError e;
  double diff2 = 0.0, ref2 = 0.0;
  for (std::size_t i = 0; i < numeric.size() && i < analytic.size(); ++i) {
    const double d = analytic[i] - numeric[i];
    diff2 += d * d;
    ref2 += numeric[i] * numeric[i];
    e.max_abs = std::max(e.max_abs, std::fabs(d));
    e.numeric_inf = std::max(e.numeric_inf, std::fabs(numeric[i]));
  }
  e.rel_norm = ref2 > 0.0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  return e;
}

// The whole gradient within rel_tol in norm, and every element within
// elem_rtol * |n_i| + elem_atol * max_j |n_j|. The numeric gradient must not vanish: a check
// against zero would pass for a forward that ignores its input. Records the errors as test
// properties (visible with --gtest_output=xml).
inline void expect_gradient_close(const std::string& name, const std::vector<float>& analytic,
                                  const std::vector<double>& numeric, double rel_tol = 1e-3,
                                  double elem_rtol = 1e-2, double elem_atol = 1e-3) {
  ASSERT_EQ(analytic.size(), numeric.size()) << name;
  const GradientError e = gradient_error(analytic, numeric);
  ASSERT_GT(e.numeric_inf, 0.0) << name << ": the numeric gradient is identically zero";
  EXPECT_LT(e.rel_norm, rel_tol) << name << ": ||analytic - numeric|| / ||numeric||";
  int reported = 0;
  for (std::size_t i = 0; i < numeric.size(); ++i) {
    const double tol = elem_rtol * std::fabs(numeric[i]) + elem_atol * e.numeric_inf;
    if (std::fabs(analytic[i] - numeric[i]) > tol && reported++ < 5) {
      ADD_FAILURE() << name << "[" << i << "]: analytic " << analytic[i] << " vs numeric " << numeric[i]
                    << " (tolerance " << tol << ")";
    }
  }
  ::testing::Test::RecordProperty(name + "_rel_norm_err", sci(e.rel_norm));
  ::testing::Test::RecordProperty(name + "_max_abs_err", sci(e.max_abs));
}

// |a_i - r_i| <= rtol * |r_i| + atol for every element; returns the largest |a_i - r_i|.
template <class A, class R>
double expect_all_near(const std::string& name, const std::vector<A>& actual, const std::vector<R>& reference,
                       double rtol, double atol) {
  EXPECT_EQ(actual.size(), reference.size()) << name;
  double worst = 0.0;
  int reported = 0;
  for (std::size_t i = 0; i < actual.size() && i < reference.size(); ++i) {
    const double a = static_cast<double>(actual[i]), r = static_cast<double>(reference[i]);
    const double d = std::fabs(a - r);
    worst = std::max(worst, d);
    if (!(d <= rtol * std::fabs(r) + atol) && reported++ < 5) {
      ADD_FAILURE() << name << "[" << i << "]: " << a << " vs reference " << r;
    }
  }
  ::testing::Test::RecordProperty(name + "_max_abs_err", sci(worst));
  return worst;
}

// For kernels that add into their output: got[i] == init[i] + fresh[i] up to fp32 rounding of the
// sum (the kernel may fuse or order the add differently from the test).
inline void expect_added_into(const std::string& name, const std::vector<float>& got, const std::vector<float>& init,
                              const std::vector<float>& fresh) {
  ASSERT_EQ(got.size(), init.size()) << name;
  ASSERT_EQ(got.size(), fresh.size()) << name;
  int reported = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double want = static_cast<double>(init[i]) + fresh[i];
    const double tol = 1e-6 * (std::fabs(init[i]) + std::fabs(fresh[i])) + 1e-12;
    if (!(std::fabs(got[i] - want) <= tol) && reported++ < 5) {
      ADD_FAILURE() << name << "[" << i << "]: " << got[i] << ", want " << init[i] << " + " << fresh[i];
    }
  }
}

}  // namespace kernel_test
}  // namespace shardft
