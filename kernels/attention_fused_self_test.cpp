// fused_attention_self_test (kernels/attention_fused.hpp): the fused kernels against the reference
// log-sum-exp kernel on the same bf16 inputs, forward and backward, on packed GQA problems with a
// one-token segment and segments longer than one 64-row tile, at head_dim 64 and 128, with q, k, v (and
// their gradients) dense and as column blocks of one array (the model's fused q/k/v projection).
#include <cmath>
#include <exception>
#include <initializer_list>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/attention_fused.hpp"
#include "kernels/attention_lse.hpp"
#include "kernels/elementwise.hpp"

namespace shardft {

namespace {

using HostFloats = std::vector<float>;

struct Case {
  std::vector<int> lengths;  // segments, back to back
  int heads, kv_heads, head_dim;
  bool qkv_columns = false;  // q, k, v (and dq, dk, dv) as column blocks of one [T, q + 2 kv] array
  bool deterministic = true;  // AttentionShape::deterministic_backward
};

// bf16-exact random values, so the reference and the fused kernels see the same numbers.
HostFloats random_bf16_values(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.f, 1.f);
  HostFloats v(n);
  for (float& x : v) x = round_to_bf16(dist(rng));
  return v;
}

View2<float> device_matrix(const HostFloats& host, std::int64_t rows, std::int64_t cols, const char* name) {
  View2<float> d(std::string(name), static_cast<std::size_t>(rows), static_cast<std::size_t>(cols));
  auto h = Kokkos::create_mirror_view(d);
  for (std::int64_t i = 0; i < rows * cols; ++i) h.data()[i] = host[static_cast<std::size_t>(i)];
  Kokkos::deep_copy(d, h);
  return d;
}

View2<bf16> to_device_bf16(const View2<float>& x) {
  View2<bf16> out("fused_self_test_bf16", x.extent(0), x.extent(1));
  to_bf16(flat(Unmanaged2<const float>(x)), flat(Unmanaged2<bf16>(out)));
  return out;
}

// ||a - ref|| / ||ref|| with a in bf16 on the device and ref in fp32 on the device.
double relative_error(Strided2<const bf16> a, const View2<float>& ref) {
  View2<float> wide("fused_self_test_wide", a.extent(0), a.extent(1));
  to_f32(a, Unmanaged2<float>(wide));
  const auto ha = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), wide);
  const auto hr = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ref);
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < ha.size(); ++i) {
    const double d = static_cast<double>(ha.data()[i]) - hr.data()[i];
    diff += d * d;
    norm += static_cast<double>(hr.data()[i]) * hr.data()[i];
    if (!std::isfinite(ha.data()[i])) return INFINITY;
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// "" when the fused kernels agree with the reference on this case, else what did not.
std::string check_case(const Case& c, std::mt19937& rng) {
  int T = 0, longest = 0;
  std::vector<std::int32_t> starts{0}, seq_ids;
  for (std::size_t s = 0; s < c.lengths.size(); ++s) {
    T += c.lengths[s];
    longest = std::max(longest, c.lengths[s]);
    starts.push_back(T);
    seq_ids.insert(seq_ids.end(), static_cast<std::size_t>(c.lengths[s]), static_cast<std::int32_t>(s));
  }
  AttentionShape shape{1, T, c.heads, c.kv_heads, c.head_dim};
  shape.deterministic_backward = c.deterministic;
  const std::int64_t qd = static_cast<std::int64_t>(c.heads) * c.head_dim, kvd = static_cast<std::int64_t>(c.kv_heads) * c.head_dim;
  const auto q = device_matrix(random_bf16_values(T * qd, rng), T, qd, "q");
  const auto k = device_matrix(random_bf16_values(T * kvd, rng), T, kvd, "k");
  const auto v = device_matrix(random_bf16_values(T * kvd, rng), T, kvd, "v");
  const auto dout = device_matrix(random_bf16_values(T * qd, rng), T, qd, "dout");
  View1<std::int32_t> ids("seq_ids", static_cast<std::size_t>(T)), seg_starts("starts", starts.size());
  Kokkos::deep_copy(ids, Kokkos::View<const std::int32_t*, Kokkos::HostSpace>(seq_ids.data(), seq_ids.size()));
  Kokkos::deep_copy(seg_starts, Kokkos::View<const std::int32_t*, Kokkos::HostSpace>(starts.data(), starts.size()));

  const std::size_t rows = static_cast<std::size_t>(T), q_cols = static_cast<std::size_t>(qd),
                    kv_cols = static_cast<std::size_t>(kvd), per_head = static_cast<std::size_t>(c.heads) * rows;
  View2<float> o("o", rows, q_cols), dq("dq", rows, q_cols), dk("dk", rows, kv_cols), dv("dv", rows, kv_cols);
  View1<float> lse("lse", per_head), delta("delta", per_head);
  attention_forward_lse_reference(shape, q, k, v, ids, o, lse);
  attention_backward_lse_reference(shape, q, k, v, ids, o, lse, dout, dq, dk, dv, delta);

  const AttentionSegments seg{seg_starts, static_cast<int>(c.lengths.size()), longest, 0};
  const auto dout16 = to_device_bf16(dout);
  // q, k, v and their gradients: three dense arrays, or column blocks of one [T, qd + 2 kvd] array each.
  const std::size_t width = q_cols + 2 * kv_cols;
  View2<bf16> qkv16("qkv16", rows, c.qkv_columns ? width : 0), dqkv16("dqkv16", rows, c.qkv_columns ? width : 0);
  const auto block = [&](const View2<bf16>& all, const View2<bf16>& dense, std::size_t c0, std::size_t cols) {
    return c.qkv_columns ? columns_of(Unmanaged2<bf16>(all), static_cast<std::int64_t>(c0), static_cast<std::int64_t>(cols))
                         : Strided2<bf16>(Unmanaged2<bf16>(dense));
  };
  View2<bf16> q_dense("q16", c.qkv_columns ? 0 : rows, q_cols), k_dense("k16", c.qkv_columns ? 0 : rows, kv_cols),
      v_dense("v16", c.qkv_columns ? 0 : rows, kv_cols);
  View2<bf16> dq_dense("dq16", c.qkv_columns ? 0 : rows, q_cols), dk_dense("dk16", c.qkv_columns ? 0 : rows, kv_cols),
      dv_dense("dv16", c.qkv_columns ? 0 : rows, kv_cols);
  const Strided2<bf16> q16 = block(qkv16, q_dense, 0, q_cols), k16 = block(qkv16, k_dense, q_cols, kv_cols),
                       v16 = block(qkv16, v_dense, q_cols + kv_cols, kv_cols);
  const Strided2<bf16> dq16 = block(dqkv16, dq_dense, 0, q_cols), dk16 = block(dqkv16, dk_dense, q_cols, kv_cols),
                       dv16 = block(dqkv16, dv_dense, q_cols + kv_cols, kv_cols);
  to_bf16(Unmanaged2<const float>(q), q16);
  to_bf16(Unmanaged2<const float>(k), k16);
  to_bf16(Unmanaged2<const float>(v), v16);
  View2<bf16> o16("o16", rows, q_cols);
  View1<float> stats("stats", static_cast<std::size_t>(fused_attention_stats_size(shape, seg)));
  fused_attention_forward(shape, seg, q16, k16, v16, o16, stats);
  fused_attention_backward(shape, seg, q16, k16, v16, o16, dout16, stats, dq16, dk16, dv16);
  Kokkos::fence();

  std::ostringstream why;
  const std::pair<const char*, double> errors[] = {{"o", relative_error(o16, o)},
                                                   {"dq", relative_error(dq16, dq)},
                                                   {"dk", relative_error(dk16, dk)},
                                                   {"dv", relative_error(dv16, dv)}};
  for (const auto& [name, err] : errors) {
    if (!(err <= 2e-2)) why << (why.tellp() > 0 ? ", " : "") << name << " off by " << err << " (relative norm)";
  }
  if (why.tellp() == 0) return "";
  std::ostringstream s;
  s << why.str() << " at " << c.lengths.size() << " segments, " << c.heads << "/" << c.kv_heads << " heads, head_dim "
    << c.head_dim << (c.qkv_columns ? ", q, k, v as column blocks of one array" : "")
    << (c.deterministic ? "" : ", the atomic backward");
  return s.str();
}

}  // namespace

namespace {
std::string run_cases(std::initializer_list<Case> cases) {
  if (!fused_attention_built()) return "not built: " + fused_attention_backend();
  std::mt19937 rng(20261126);
  try {
    for (const Case& c : cases) {
      const std::string failure = check_case(c, rng);
      if (!failure.empty()) return failure;
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
}  // namespace

std::string fused_attention_self_test(bool deterministic_backward) {
  return run_cases({{{1, 70, 33, 130}, 4, 2, 64, false, deterministic_backward},
                    {{96, 1, 64}, 4, 1, 128, false, deterministic_backward}});
}

std::string fused_attention_column_blocks_self_test() {
  return run_cases({{{1, 70, 33, 130}, 4, 2, 64, true}, {{96, 1, 64}, 4, 1, 128, true}});
}

}  // namespace shardft
