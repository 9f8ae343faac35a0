#include "kernels/elementwise.hpp"
#include "kernels/math.hpp"

#include "kernels/bf16.hpp"
#include "kernels/bf16_pack.hpp"
#include "kernels/device_traffic.hpp"
#include "kernels/kernel_scratch.hpp"

#include <stdexcept>
#include <string>

namespace shardft {

void add_inplace(Unmanaged1<float> y, Unmanaged1<const float> x) {
  Kokkos::parallel_for("add_inplace", Range(0, y.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) { y(i) += x(i); });
}

void scale_inplace(Unmanaged1<float> x, float c) {
  Kokkos::parallel_for("scale_inplace", Range(0, x.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) { x(i) *= c; });
}

namespace {
using Team = TeamLaunch;
using Member = Team::member_type;
constexpr std::int64_t kBlock = 4096;
constexpr int kLanes = 32;

// The sum of a block's squares but its last len % kLanes elements, lane l summing elements l, l + kLanes,
// ... in double. One thread (Serial): every lane in registers in one pass, the inner loop over the lanes
// vectorised. Several (a GPU warp): thread t sums lanes t, t + threads, ..., so at each step neighbouring
// threads read neighbouring floats (coalesced), then the team adds the threads' parts.
KOKKOS_INLINE_FUNCTION double block_lane_sums(const Member& m, const float* p, std::int64_t full) {
  const int threads = m.team_size();
  double sum = 0.0;
  if (threads == 1) {
    double lane[kLanes] = {};
    for (std::int64_t i = 0; i < full; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) lane[l] += static_cast<double>(p[i + l]) * p[i + l];
    }
    for (int l = 0; l < kLanes; ++l) sum += lane[l];
    return sum;
  }
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(m, threads),
      [&](const int t, double& s) {
        double part = 0.0;
        for (int l = t; l < kLanes; l += threads) {
          double lane = 0.0;
          for (std::int64_t i = 0; i < full; i += kLanes) lane += static_cast<double>(p[i + l]) * p[i + l];
          part += lane;
        }
        s += part;
      },
      sum);
  return sum;
}

// Threads per block: up to one per lane (a warp on a GPU), a power of two dividing kLanes; one on Serial.
template <class Body>
int lane_team_size(int blocks, const Body& body) {
  const int most = Team(blocks, 1).team_size_max(body, Kokkos::ParallelReduceTag());
  int threads = 1;
  while (2 * threads <= most && 2 * threads <= kLanes) threads *= 2;
  return threads;
}
}  // namespace

namespace {
// A GPU: one thread per 16-byte pack of four, in Kokkos' range reduction (threads of a block on
// neighbouring packs, a block-wide tree, then the blocks' partials in a fixed order: deterministic), each
// pack's squares added in double; the last n % 4 elements are the extra index packs. (The team-per-block
// form below gives a GPU 32-thread blocks that leave most of its memory bandwidth unused.)
void sum_squares_packs(Unmanaged1<const float> x, Unmanaged1<double> out) {
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0)), packs = n / 4;
  const float* data = x.data();
  Kokkos::parallel_reduce(
      "sum_squares", Range(0, packs + 1),
      KOKKOS_LAMBDA(const std::int64_t p, double& acc) {
        if (p < packs) {
          float v[4];
          load_floats<4>(data + 4 * p, v);
          acc += (static_cast<double>(v[0]) * v[0] + static_cast<double>(v[1]) * v[1]) +
                 (static_cast<double>(v[2]) * v[2] + static_cast<double>(v[3]) * v[3]);
        } else {
          for (std::int64_t i = 4 * packs; i < n; ++i) acc += static_cast<double>(data[i]) * data[i];
        }
      },
      Kokkos::View<double, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(out.data()));
}
}  // namespace

// Blocks of kBlock elements, one team each, each block summed in kLanes independent double accumulators:
// one running double sum is a chain of dependent adds (latency-bound, about 1.4 GB/s); independent lanes
// vectorise and run at memory speed. Still double precision throughout, only the order of the additions
// changes. A team per block, not a thread: with one GPU thread streaming each 16 KiB block, every load of
// a warp touched 32 cache lines 16 KiB apart. On Serial a team is one thread running the loop the thread
// per block ran, so CPU results keep their bits.
void sum_squares(Unmanaged1<const float> x, Unmanaged1<double> out) {
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  if (kComputeOnDevice && packs_fit<4>(n - n % 4, {{x.data(), 4}})) return sum_squares_packs(x, out);
  const int blocks = static_cast<int>((n + kBlock - 1) / kBlock);
  const float* data = x.data();
  const auto body = KOKKOS_LAMBDA(const Member& m, double& acc) {
    const std::int64_t b = m.league_rank();
    const float* p = data + b * kBlock;
    const std::int64_t len = n - b * kBlock < kBlock ? n - b * kBlock : kBlock;
    const std::int64_t full = len - len % kLanes;
    double sum = block_lane_sums(m, p, full);
    Kokkos::single(Kokkos::PerTeam(m), [&]() {
      for (std::int64_t i = full; i < len; ++i) sum += static_cast<double>(p[i]) * p[i];
      acc += sum;
    });
  };
  Kokkos::parallel_reduce("sum_squares", Team(blocks, lane_team_size(blocks, body)), body,
                          Kokkos::View<double, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(out.data()));
}

double sum_squares(Unmanaged1<const float> x) {
  const auto out = kernel_scratch<double>("sum_squares_host", 1);
  sum_squares(x, out);
  return read_scalar(out, "sum_squares");
}

// The factor once, on the device, then one multiply per element (by 1 when not clipping: exact).
void clip_to_norm(Unmanaged1<float> g, Unmanaged1<const double> norm_sq, double max_norm) {
  if (!(max_norm > 0)) return;
  const auto factor = kernel_scratch<float>("clip_factor", 1);
  clip_factor(norm_sq, max_norm, factor);
  apply_clip_factor(g, factor);
}

void clip_factor(Unmanaged1<const double> norm_sq, double max_norm, Unmanaged1<float> factor) {
  Kokkos::parallel_for(
      "clip_factor", Range(0, 1), KOKKOS_LAMBDA(const std::int64_t) {
        const double norm = kmath::sqrt(norm_sq(0));
        factor(0) = max_norm > 0 && norm > max_norm ? static_cast<float>(max_norm / (norm + 1e-6)) : 1.f;
      });
}

void apply_clip_factor(Unmanaged1<float> g, Unmanaged1<const float> factor) {
  Kokkos::parallel_for(
      "clip_to_norm", Range(0, g.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) { g(i) *= factor(0); });
}

void add_scalar(Unmanaged1<double> acc, Unmanaged1<const double> x) {
  Kokkos::parallel_for(
      "add_scalar", Range(0, 1), KOKKOS_LAMBDA(const std::int64_t) { acc(0) += x(0); });
}

double read_scalar(Unmanaged1<const double> x, const char* what) {
  double value = 0.0;
  Kokkos::deep_copy(Kokkos::View<double, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(&value),
                    Kokkos::View<const double, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(x.data()));
  count_device_copy(what, sizeof(double));
  count_host_sync(what);
  return value;
}

void round_to_bf16(Unmanaged1<const float> src, Unmanaged1<float> dst) {
  Kokkos::parallel_for(
      "round_to_bf16", Range(0, src.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) { dst(i) = round_to_bf16(src(i)); });
}

void to_bf16(Unmanaged1<const float> src, Unmanaged1<bf16> dst) {
  Kokkos::parallel_for(
      "to_bf16", Range(0, src.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) { dst(i) = bf16(src(i)); });
}

// Groups of four where both buffers allow (16-byte fp32 and 8-byte bf16 accesses: on a GPU a quarter of
// the memory instructions), then the tail element by element; each element rounded alike either way.
void round_and_copy_to_bf16(Unmanaged1<float> x, Unmanaged1<bf16> kept) {
  constexpr int W = 4;
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  const std::int64_t groups = packs_fit<W>(W, {{x.data(), 4}, {kept.data(), 2}}) ? n / W : 0;
  float* xp = x.data();
  bf16* kp = kept.data();
  Kokkos::parallel_for(
      "round_and_copy_to_bf16", Range(0, groups + (n - groups * W)), KOKKOS_LAMBDA(const std::int64_t t) {
        if (t < groups) {
          float v[W];
          load_floats<W>(xp + t * W, v);
          for (int e = 0; e < W; ++e) v[e] = round_to_bf16(v[e]);
          store_floats<W>(kp + t * W, v);  // exact: the values are bf16 already
          store_floats<W>(xp + t * W, v);
          return;
        }
        const std::int64_t i = groups * W + (t - groups);
        const bf16 b(xp[i]);
        kp[i] = b;
        xp[i] = static_cast<float>(b);
      });
}

void to_f32(Unmanaged1<const bf16> src, Unmanaged1<float> dst) {
  Kokkos::parallel_for(
      "to_f32", Range(0, src.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) { dst(i) = static_cast<float>(src(i)); });
}

namespace {
void check_same_shape(std::size_t r0, std::size_t c0, std::size_t r1, std::size_t c1, const char* what) {
  if (r0 != r1 || c0 != c1) throw std::invalid_argument(std::string(what) + ": source and destination shapes differ");
}
}  // namespace

void to_f32(Strided2<const bf16> src, Unmanaged2<float> dst) {
  check_same_shape(src.extent(0), src.extent(1), dst.extent(0), dst.extent(1), "to_f32");
  const std::int64_t cols = static_cast<std::int64_t>(src.extent(1));
  Kokkos::parallel_for(
      "to_f32_strided", Range(0, static_cast<std::int64_t>(src.extent(0)) * cols), KOKKOS_LAMBDA(const std::int64_t t) {
        dst(t / cols, t % cols) = static_cast<float>(src(t / cols, t % cols));
      });
}

void to_bf16(Unmanaged2<const float> src, Strided2<bf16> dst) {
  check_same_shape(src.extent(0), src.extent(1), dst.extent(0), dst.extent(1), "to_bf16");
  const std::int64_t cols = static_cast<std::int64_t>(src.extent(1));
  Kokkos::parallel_for(
      "to_bf16_strided", Range(0, static_cast<std::int64_t>(src.extent(0)) * cols), KOKKOS_LAMBDA(const std::int64_t t) {
        dst(t / cols, t % cols) = bf16(src(t / cols, t % cols));
      });
}

bool all_finite(Unmanaged1<const float> x) {
  std::int64_t bad = 0;
  Kokkos::parallel_reduce(
      "all_finite", Range(0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i, std::int64_t& acc) { acc += kmath::isfinite(x(i)) ? 0 : 1; }, bad);
  count_host_sync("all_finite");
  return bad == 0;
}

}  // namespace shardft
