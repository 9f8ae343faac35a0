// Softmax cross-entropy, one team per row of logits [N, V] (formulas in cross_entropy.hpp):
//   m_n = max_v z[n,v];  s_n = sum_v exp(z[n,v] - m_n);  lse_n = m_n + log s_n;  loss_n = lse_n - z[n, t_n]
// A row is a whole vocabulary (32k-256k logits), so its max and sum are team reductions over the
// columns; the league of rows gives the GPU its second level of parallelism. The per-row loss enters
// the league reduction once per team (Kokkos::single), in double.
//
// On the Serial backend a team is one thread and the reductions run v = 0, 1, ... in order: the same
// float operations, in the same order, as the one-thread-per-row loop this replaces.
//
// bf16 logits move in 16-byte packs of eight (bf16_pack.hpp) where a row starts 16-byte aligned: an
// eighth of the memory instructions on a GPU, the same operations in the same order on one thread.
// Where the host has AVX-512 (F, BW, VL, BF16), the rows run on kernels/avx512_cross_entropy.hpp's loops
// instead (libm's expf per logit, twice, kept the team kernels scalar there; and a Serial team's one
// running sum per row loses digits over a real vocabulary that 16 lanes keep).
#include "kernels/cross_entropy.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/avx512_cross_entropy.hpp"
#include "kernels/bf16_pack.hpp"
#include "kernels/device_traffic.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/kernel_scratch.hpp"
#include "kernels/math.hpp"

namespace shardft {

namespace {

using Team = TeamLaunch;
using Member = Team::member_type;

// A row's elements in packs of W (bf16_pack.hpp): W = 1 reads z[v] as it is stored (fp32, or bf16 where
// a row does not start 16-byte aligned); W = 8 moves eight bf16 logits per access.
template <class T, int W>
struct RowPacks {
  KOKKOS_INLINE_FUNCTION static void load(const T* z, int pack, float* out) {
    for (int e = 0; e < W; ++e) out[e] = static_cast<float>(z[pack * W + e]);
  }
  KOKKOS_INLINE_FUNCTION static void store(T* z, int pack, const float* in) {
    for (int e = 0; e < W; ++e) z[pack * W + e] = T(in[e]);
  }
};
template <>
struct RowPacks<bf16, kBf16PackWidth> {
  static constexpr int W = kBf16PackWidth;
  KOKKOS_INLINE_FUNCTION static void load(const bf16* z, int pack, float* out) {
    const Bf16Pack<W> p = load_pack<W>(z + pack * W);
    for (int e = 0; e < W; ++e) out[e] = p.get(e);
  }
  KOKKOS_INLINE_FUNCTION static void store(bf16* z, int pack, const float* in) {
    Bf16Pack<W> p;
    for (int e = 0; e < W; ++e) p.set(e, in[e]);
    store_pack<W>(z + pack * W, p);
  }
};

// Every thread of the team gets the row's log-sum-exp (nested reductions broadcast their result).
// Each thread strides over the row's packs with its partial in a local: on a GPU neighbouring threads
// read neighbouring packs, and on one thread it is a plain loop in registers over v = 0, 1, ... whatever
// W is. (A reduction straight over TeamThreadRange(m, vocab) keeps the accumulator in memory on the host
// backends: a store and a reload per logit, which made the max pass twice as slow.)
// z in fp32 or bf16 (a bf16 step's logits, as autocast's lm_head hands them to the loss), read into fp32.
template <class T, int W>
KOKKOS_INLINE_FUNCTION float team_row_logsumexp_two_pass(const Member& m, const T* z, int vocab) {
  const int threads = m.team_size(), packs = vocab / W;
  float mx = 0.f;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(m, threads),
      [&](const int t, float& acc) {
        float part = Kokkos::reduction_identity<float>::max();
        for (int p = t; p < packs; p += threads) {
          float zv[W];
          RowPacks<T, W>::load(z, p, zv);
          for (int e = 0; e < W; ++e) part = zv[e] > part ? zv[e] : part;
        }
        acc = part > acc ? part : acc;
      },
      Kokkos::Max<float>(mx));
  float s = 0.f;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(m, threads),
      [&](const int t, float& acc) {
        const float row_max = mx;
        float part = 0.f;
        for (int p = t; p < packs; p += threads) {
          float zv[W];
          RowPacks<T, W>::load(z, p, zv);
          for (int e = 0; e < W; ++e) part += kmath::exp(zv[e] - row_max);
        }
        acc += part;
      },
      s);
  return mx + kmath::log(s);
}

// exp over packed bf16 rows (W > 1): on a GPU the hardware approximation (kmath::fast_exp; a few ulps
// in fp32, far below the bf16 rounding of the gradient it feeds), which keeps the kernel bound by memory;
// elsewhere, and on the host always, the full-precision exp.
template <int W>
KOKKOS_INLINE_FUNCTION float row_exp(float x) {
  if constexpr (W > 1) {
    return kmath::fast_exp(x);
  } else {
    return kmath::exp(x);
  }
}

// One pass over the row instead of two (the logits are the largest array of a step: a GPU's reads are
// what this kernel costs; its exps are kmath::fast_exp): each thread keeps a running max and a sum of
// exp(z - max) over its packs, rescaling the sum when a pack raises the max; the team then takes the
// row's max and adds the threads' sums rescaled to it. The same value as the two passes up to rounding.
// Each thread runs each reduction's body once, so the sum it keeps from the first is added exactly once
// in the second.
template <class T, int W>
KOKKOS_INLINE_FUNCTION float team_row_logsumexp_one_pass(const Member& m, const T* z, int vocab) {
  const int threads = m.team_size(), packs = vocab / W;
  float thread_max = Kokkos::reduction_identity<float>::max(), thread_sum = 0.f;
  float mx = 0.f;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(m, threads),
      [&](const int t, float& acc) {
        float run_max = Kokkos::reduction_identity<float>::max(), run_sum = 0.f;
        for (int p = t; p < packs; p += threads) {
          float zv[W];
          RowPacks<T, W>::load(z, p, zv);
          float pack_max = zv[0];
          for (int e = 1; e < W; ++e) pack_max = zv[e] > pack_max ? zv[e] : pack_max;
          if (pack_max > run_max) {
            run_sum *= kmath::fast_exp(run_max - pack_max);
            run_max = pack_max;
          }
          for (int e = 0; e < W; ++e) run_sum += kmath::fast_exp(zv[e] - run_max);
        }
        thread_max = run_max;
        thread_sum = run_sum;
        acc = run_max > acc ? run_max : acc;
      },
      Kokkos::Max<float>(mx));
  float s = 0.f;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(m, threads),
      [&](const int, float& acc) { acc += thread_sum > 0.f ? thread_sum * kmath::fast_exp(thread_max - mx) : 0.f; }, s);
  return mx + kmath::log(s);
}

// A GPU reads the row once for its log-sum-exp; the host keeps the two passes (its results keep their bits).
template <class T, int W>
KOKKOS_INLINE_FUNCTION float team_row_logsumexp(const Member& m, const T* z, int vocab) {
  if constexpr (kComputeOnDevice && W > 1) {
    return team_row_logsumexp_one_pass<T, W>(m, z, vocab);
  } else {
    return team_row_logsumexp_two_pass<T, W>(m, z, vocab);
  }
}

std::int64_t count_targets(Unmanaged1<const std::int32_t> targets) {
  std::int64_t count = 0;
  Kokkos::parallel_reduce(
      "cross_entropy_count", Range(0, targets.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t n, std::int64_t& acc) { acc += targets(n) == kIgnoreIndex ? 0 : 1; }, count);
  count_host_sync("cross_entropy target count");
  return count;
}

void check_shapes(const char* name, std::size_t rows, std::size_t vocab, std::size_t targets) {
  if (targets != rows) {
    throw std::invalid_argument(std::string(name) + ": " + std::to_string(targets) + " targets for " +
                                std::to_string(rows) + " rows of logits");
  }
  if (rows > 0 && vocab == 0) throw std::invalid_argument(std::string(name) + ": logits have no columns");
}

}  // namespace

namespace {

template <class T, int W>
void forward_rows(const char* name, Unmanaged2<const T> logits, Unmanaged1<const std::int32_t> targets,
                  Unmanaged1<double> loss_sum) {
  const int vocab = static_cast<int>(logits.extent(1));
  const auto part = kernel_scratch<double>("cross_entropy_loss_part", 1);
  Kokkos::parallel_reduce(
      name, Team(static_cast<int>(logits.extent(0)), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& m, double& acc) {
        const int n = m.league_rank();
        const std::int32_t t = targets(n);
        if (t == kIgnoreIndex) return;
        const T* z = &logits(n, 0);
        const float lse = team_row_logsumexp<T, W>(m, z, vocab);
        Kokkos::single(Kokkos::PerTeam(m), [&]() { acc += static_cast<double>(lse - static_cast<float>(z[t])); });
      },
      Kokkos::View<double, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(part.data()));
  add_scalar(loss_sum, part);
}

template <class T, int W>
void forward_backward_rows(const char* name, Unmanaged2<T> logits, Unmanaged1<const std::int32_t> targets,
                           float grad_scale, Unmanaged1<double> loss_sum) {
  const int vocab = static_cast<int>(logits.extent(1)), packs = vocab / W;
  const auto part = kernel_scratch<double>("cross_entropy_loss_part", 1);
  Kokkos::parallel_reduce(
      name, Team(static_cast<int>(logits.extent(0)), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& m, double& acc) {
        const int n = m.league_rank();
        const std::int32_t t = targets(n);
        T* z = &logits(n, 0);
        if (t == kIgnoreIndex) {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(m, packs), [&](const int p) {
            float zero[W];
            for (int e = 0; e < W; ++e) zero[e] = 0.f;
            RowPacks<T, W>::store(z, p, zero);
          });
          return;
        }
        // Read before the gradient overwrites it: the two reductions below are team-wide
        // synchronisations, so no thread writes the row before every thread has read z[t].
        const float zt = static_cast<float>(z[t]);
        const float lse = team_row_logsumexp<T, W>(m, z, vocab);
        Kokkos::single(Kokkos::PerTeam(m), [&]() { acc += static_cast<double>(lse - zt); });
        // grad_scale * p, then - grad_scale at the target (not grad_scale * (p - 1)): the roundings of
        // the row loop this replaces.
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, packs), [&](const int p) {
          float g[W];
          RowPacks<T, W>::load(z, p, g);
          for (int e = 0; e < W; ++e) {
            const float ge = grad_scale * row_exp<W>(g[e] - lse);
            g[e] = p * W + e == t ? ge - grad_scale : ge;
          }
          RowPacks<T, W>::store(z, p, g);
        });
      },
      Kokkos::View<double, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(part.data()));
  add_scalar(loss_sum, part);
}

// Where the host has AVX-512 (F, BW, VL, BF16): every row on kernels/avx512_cross_entropy.hpp's loops
// (the fp32 and the bf16 kernels alike, so a bf16 row's loss stays its widening's), each row's loss added
// in double in row order as the team kernels add theirs, the gradient written over the logits where
// `backward`; and true. False elsewhere and on a GPU (a template, so that a GPU build never instantiates
// the host loop).
template <class T>
bool on_avx512_rows(const char* name, Unmanaged2<T> logits, Unmanaged1<const std::int32_t> targets, bool backward,
                    float grad_scale, Unmanaged1<double> loss_sum) {
  if constexpr (kComputeOnDevice) {
    return false;
  } else {
    if (!avx512::cross_entropy_fits()) return false;
    const std::int64_t vocab = static_cast<std::int64_t>(logits.extent(1));
    const std::int64_t ld = static_cast<std::int64_t>(logits.stride_0());
    T* const base = logits.data();
    const auto part = kernel_scratch<double>("cross_entropy_loss_part", 1);
    Kokkos::parallel_reduce(
        name, Kokkos::RangePolicy<ExecSpace>(0, static_cast<std::int64_t>(logits.extent(0))),
        [=](const std::int64_t n, double& acc) {
          const std::int32_t t = targets(n);
          T* z = base + n * ld;
          if (t == kIgnoreIndex) {
            if constexpr (!std::is_const<T>::value) {
              if (backward) std::fill(z, z + vocab, T(0.f));
            }
            return;
          }
          const float zt = static_cast<float>(z[t]);  // before the gradient is written over it
          const float lse = avx512::row_logsumexp(raw_elements(z), vocab);
          acc += static_cast<double>(lse - zt);
          if constexpr (!std::is_const<T>::value) {
            if (backward) avx512::row_softmax_gradient(raw_elements(z), vocab, lse, t, grad_scale);
          }
        },
        Kokkos::View<double, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(part.data()));
    add_scalar(loss_sum, part);
    return true;
  }
}

// bf16 rows in packs of eight where every row starts 16-byte aligned, else element by element.
template <class T>
void forward_any(const char* name, Unmanaged2<const T> logits, Unmanaged1<const std::int32_t> targets,
                 Unmanaged1<double> loss_sum) {
  check_shapes(name, logits.extent(0), logits.extent(1), targets.extent(0));
  if (on_avx512_rows(name, logits, targets, false, 0.f, loss_sum)) return;
  if constexpr (std::is_same<T, bf16>::value) {
    if (bf16_pack_fits(static_cast<std::int64_t>(logits.extent(1)), {logits.data()})) {
      return forward_rows<T, kBf16PackWidth>(name, logits, targets, loss_sum);
    }
  }
  forward_rows<T, 1>(name, logits, targets, loss_sum);
}

template <class T>
void forward_backward_any(const char* name, Unmanaged2<T> logits, Unmanaged1<const std::int32_t> targets,
                          float grad_scale, Unmanaged1<double> loss_sum) {
  check_shapes(name, logits.extent(0), logits.extent(1), targets.extent(0));
  if (on_avx512_rows(name, logits, targets, true, grad_scale, loss_sum)) return;
  if constexpr (std::is_same<T, bf16>::value) {
    if (bf16_pack_fits(static_cast<std::int64_t>(logits.extent(1)), {logits.data()})) {
      return forward_backward_rows<T, kBf16PackWidth>(name, logits, targets, grad_scale, loss_sum);
    }
  }
  forward_backward_rows<T, 1>(name, logits, targets, grad_scale, loss_sum);
}

}  // namespace

void cross_entropy_forward(Unmanaged2<const float> logits, Unmanaged1<const std::int32_t> targets,
                           Unmanaged1<double> loss_sum) {
  forward_any("cross_entropy_forward", logits, targets, loss_sum);
}

void cross_entropy_forward(Unmanaged2<const bf16> logits, Unmanaged1<const std::int32_t> targets,
                           Unmanaged1<double> loss_sum) {
  forward_any("cross_entropy_forward_bf16", logits, targets, loss_sum);
}

void cross_entropy_forward_backward(Unmanaged2<float> logits, Unmanaged1<const std::int32_t> targets,
                                    float grad_scale, Unmanaged1<double> loss_sum) {
  forward_backward_any("cross_entropy_forward_backward", logits, targets, grad_scale, loss_sum);
}

void cross_entropy_forward_backward(Unmanaged2<bf16> logits, Unmanaged1<const std::int32_t> targets,
                                    float grad_scale, Unmanaged1<double> loss_sum) {
  forward_backward_any("cross_entropy_forward_backward_bf16", logits, targets, grad_scale, loss_sum);
}

namespace {

CrossEntropySums read_sums(Unmanaged1<double> sum, Unmanaged1<const std::int32_t> targets) {
  CrossEntropySums out;
  out.loss_sum = read_scalar(sum, "cross_entropy loss");
  out.count = count_targets(targets);
  return out;
}

}  // namespace

std::int64_t cross_entropy_target_count(Unmanaged1<const std::int32_t> targets) { return count_targets(targets); }

CrossEntropySums cross_entropy_forward(Unmanaged2<const float> logits, Unmanaged1<const std::int32_t> targets) {
  const auto sum = kernel_scratch<double>("cross_entropy_host_sum", 1);
  Kokkos::deep_copy(ExecSpace(), sum, 0.0);
  cross_entropy_forward(logits, targets, sum);
  return read_sums(sum, targets);
}

CrossEntropySums cross_entropy_forward_backward(Unmanaged2<float> logits, Unmanaged1<const std::int32_t> targets,
                                                float grad_scale) {
  const auto sum = kernel_scratch<double>("cross_entropy_host_sum", 1);
  Kokkos::deep_copy(ExecSpace(), sum, 0.0);
  cross_entropy_forward_backward(logits, targets, grad_scale, sum);
  return read_sums(sum, targets);
}

}  // namespace shardft
