#include "kernels/nf4_quantize.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/device_traffic.hpp"
#include "kernels/math.hpp"

namespace shardft {

namespace {

using TeamPolicy = TeamLaunch;
using Team = TeamPolicy::member_type;
using Scratch = Kokkos::View<float*, ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// Tables passed to kernels by value (kernel arguments on a GPU: no allocation per call).
struct Nf4Table {
  float v[16];
};
struct DynamicTable {
  float v[256];
};

// dQuantizeNF4: the number of midpoints x lies strictly above. Same as bitsandbytes' decision tree
// (a tie goes to the lower index; NaN, from an all-zero block's 0 * (1/0), compares false: 0).
KOKKOS_INLINE_FUNCTION unsigned nf4_index(float x) {
  const float mid[15] = {-0.8480964004993439f, -0.6106329262256622f, -0.4599952697753906f, -0.33967943489551544f,
                         -0.23460740596055984f, -0.13791173323988914f, -0.045525018125772476f, 0.03979014977812767f,
                         0.1202552504837513f,  0.2035212516784668f,  0.2920137718319893f,   0.3893125355243683f,
                         0.5016634166240692f,  0.6427869200706482f,  0.8614784181118011f};
  unsigned idx = 0;
  for (int t = 0; t < 15; ++t) idx += x > mid[t] ? 1u : 0u;
  return idx;
}

// bitsandbytes' dQuantize<0>: a 7-step binary search over the sorted map from entry 127, then the
// nearer of the last pivot and the neighbour on x's side; a tie keeps the pivot.
KOKKOS_INLINE_FUNCTION unsigned dynamic_index(const DynamicTable& code, float x) {
  int pivot = 127, upper_pivot = 255, lower_pivot = 0;
  float lower = -1.0f, upper = 1.0f, val = code.v[pivot];
  for (int step = 64; step > 0; step >>= 1) {
    if (x > val) {
      lower_pivot = pivot;
      lower = val;
      pivot += step;
    } else {
      upper_pivot = pivot;
      upper = val;
      pivot -= step;
    }
    val = code.v[pivot];
  }
  if (upper_pivot == 255) upper = code.v[255];
  if (lower_pivot == 0) lower = code.v[0];
  if (x > val) return static_cast<unsigned>(x > (upper + val) * 0.5f ? upper_pivot : pivot);
  return static_cast<unsigned>(x < (lower + val) * 0.5f ? lower_pivot : pivot);
}

// fp32 product a * b, rounded on its own and never fused with a following add into an FMA (bitsandbytes
// rounds scale = code * absmax2 before adding the offset). Host: this file is compiled with
// -ffp-contract=off (CMakeLists.txt); device: the intrinsic is never contracted.
KOKKOS_INLINE_FUNCTION float mul_rounded(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

KOKKOS_INLINE_FUNCTION void store(const Unmanaged1<float>& dst, std::int64_t i, float v) { dst(i) = v; }
KOKKOS_INLINE_FUNCTION void store(const Unmanaged1<bf16>& dst, std::int64_t i, float v) { dst(i) = bf16(v); }

Nf4Table nf4_table() {
  Nf4Table t{};
  for (int i = 0; i < 16; ++i) t.v[i] = nf4_code()[i];
  return t;
}
DynamicTable dynamic_table() {
  DynamicTable t{};
  for (int i = 0; i < 256; ++i) t.v[i] = dynamic_map_signed()[i];
  return t;
}

constexpr int kBlocksPerTeam = 32;  // one team dequantizes 32 blocks = 2048 values

// Team: the scales of its blocks and the NF4 table into scratch, then one byte (two values) per thread.
template <class Out>
void dequantize_into(Unmanaged1<const std::uint8_t> packed, Unmanaged1<const std::uint8_t> absmax_q,
                     Unmanaged1<const float> absmax2, float offset, Unmanaged1<Out> dst) {
  const std::int64_t n = static_cast<std::int64_t>(dst.extent(0));
  if (n == 0) return;
  if (static_cast<std::int64_t>(packed.extent(0)) < nf4_packed_bytes(n) ||
      static_cast<std::int64_t>(absmax_q.extent(0)) < nf4_blocks(n) ||
      static_cast<std::int64_t>(absmax2.extent(0)) < nf4_absmax_blocks(n)) {
    throw std::invalid_argument("nf4_dequantize: packed, absmax_q or absmax2 is shorter than " + std::to_string(n) +
                                " values need");
  }
  const std::int64_t blocks = nf4_blocks(n), nbytes = nf4_packed_bytes(n);
  const int league = static_cast<int>((blocks + kBlocksPerTeam - 1) / kBlocksPerTeam);
  TeamPolicy policy(league, Kokkos::AUTO);
  policy.set_scratch_size(0, Kokkos::PerTeam(Scratch::shmem_size(16) + Scratch::shmem_size(kBlocksPerTeam)));
  const Nf4Table nf4 = nf4_table();
  const DynamicTable dyn = dynamic_table();
  Kokkos::parallel_for(
      "nf4_dequantize", policy, KOKKOS_LAMBDA(const Team& team) {
        Scratch lut(team.team_scratch(0), 16), scale(team.team_scratch(0), kBlocksPerTeam);
        const std::int64_t first = static_cast<std::int64_t>(team.league_rank()) * kBlocksPerTeam;
        const std::int64_t nb = blocks - first < kBlocksPerTeam ? blocks - first : kBlocksPerTeam;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, 16), [&](const int c) { lut(c) = nf4.v[c]; });
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, static_cast<int>(nb)), [&](const int b) {
          const std::int64_t k = first + b;
          scale(b) = mul_rounded(dyn.v[absmax_q(k)], absmax2(k / kNf4AbsmaxBlock)) + offset;
        });
        team.team_barrier();
        const std::int64_t byte0 = first * (kNf4Block / 2);
        const std::int64_t byte1 = nbytes < byte0 + nb * (kNf4Block / 2) ? nbytes : byte0 + nb * (kNf4Block / 2);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, byte0, byte1), [&](const std::int64_t j) {
          const unsigned byte = packed(j);
          const float s = scale(static_cast<int>(j / (kNf4Block / 2) - first));
          store(dst, 2 * j, lut(static_cast<int>(byte >> 4)) * s);
          if (2 * j + 1 < n) store(dst, 2 * j + 1, lut(static_cast<int>(byte & 0xFu)) * s);
        });
      });
}

}  // namespace

const std::array<float, 16>& nf4_code() {
  static const std::array<float, 16> code = {
      -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,
      -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,
      0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f,
      1.0f};
  return code;
}

// create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8): for e = 0..6, the 2^e midpoints of
// torch.linspace(0.1, 1, 2^e + 1) (fp32) times 10^(e-6), both signs, plus 0 and 1, sorted. Each fp32
// operation is rounded as torch rounds it (linspace: fused start + step*i below the half, end - step*(steps-1-i)
// above, as its vectorized CPU kernel computes them).
const std::array<float, 256>& dynamic_map_signed() {
  static const std::array<float, 256> map = [] {
    std::vector<float> data;
    for (int e = 0; e < 7; ++e) {
      const int steps = (1 << e) + 1;
      const float start = 0.1f, end = 1.0f;
      const float step = (end - start) / static_cast<float>(steps - 1);
      std::vector<float> bounds(steps);
      for (int i = 0; i < steps; ++i) {
        bounds[i] = i < steps / 2 ? std::fma(step, static_cast<float>(i), start)
                                  : std::fma(-step, static_cast<float>(steps - 1 - i), end);
      }
      double p10 = 1.0;
      for (int k = 0; k < 6 - e; ++k) p10 /= 10.0;  // 10 ** (e - 6) as Python computes it
      const float scale = static_cast<float>(e == 6 ? 1.0 : p10);
      for (int i = 0; i + 1 < steps; ++i) {
        const float mean = (bounds[i] + bounds[i + 1]) / 2.0f;
        data.push_back(mul_rounded(scale, mean));
        data.push_back(-mul_rounded(scale, mean));
      }
    }
    data.push_back(0.0f);
    data.push_back(1.0f);
    std::sort(data.begin(), data.end());
    std::array<float, 256> out{};
    std::copy(data.begin(), data.end(), out.begin());
    return out;
  }();
  return map;
}

std::int64_t nf4_quantize_blocks(Unmanaged1<const float> src, Unmanaged1<std::uint8_t> packed,
                                 Unmanaged1<float> absmax) {
  const std::int64_t n = static_cast<std::int64_t>(src.extent(0));
  std::int64_t bad_total = 0;
  Kokkos::parallel_reduce(
      "nf4_quantize_blocks", Range(0, nf4_blocks(n)),
      KOKKOS_LAMBDA(const std::int64_t k, std::int64_t& bad_sum) {
        const std::int64_t b = k * kNf4Block, e = b + kNf4Block < n ? b + kNf4Block : n;
        float amax = 0.f;
        for (std::int64_t i = b; i < e; ++i) {
          const float v = src(i);
          if (!kmath::isfinite(v)) ++bad_sum;
          const float a = v < 0 ? -v : v;
          amax = a > amax ? a : amax;
        }
        absmax(k) = amax;
        const float inv = 1.0f / amax;
        for (std::int64_t i = b; i < e; i += 2) {  // b is even: a byte never spans two blocks
          const float hi = src(i) * inv, lo = (i + 1 < e ? src(i + 1) : 0.0f) * inv;  // odd n pads with 0
          packed(i / 2) = static_cast<std::uint8_t>(nf4_index(hi) << 4 | nf4_index(lo));
        }
      },
      bad_total);
  count_host_sync("nf4_quantize non-finite count");
  return bad_total;
}

float nf4_absmax_offset(Unmanaged1<const float> absmax) {
  const std::int64_t blocks = static_cast<std::int64_t>(absmax.extent(0));
  if (blocks == 0) return 0.f;
  double sum = 0.0;
  Kokkos::parallel_reduce(
      "nf4_absmax_offset", Range(0, blocks), KOKKOS_LAMBDA(const std::int64_t k, double& s) { s += absmax(k); }, sum);
  count_host_sync("nf4_quantize absmax mean");
  return static_cast<float>(sum / static_cast<double>(blocks));
}

void nf4_quantize_absmax(Unmanaged1<const float> absmax, float offset, Unmanaged1<std::uint8_t> absmax_q,
                         Unmanaged1<float> absmax2) {
  const std::int64_t blocks = static_cast<std::int64_t>(absmax.extent(0));
  const DynamicTable dyn = dynamic_table();
  Kokkos::parallel_for(
      "nf4_quantize_absmax", Range(0, (blocks + kNf4AbsmaxBlock - 1) / kNf4AbsmaxBlock),
      KOKKOS_LAMBDA(const std::int64_t m) {
        const std::int64_t b = m * kNf4AbsmaxBlock, e = b + kNf4AbsmaxBlock < blocks ? b + kNf4AbsmaxBlock : blocks;
        float amax = 0.f;
        for (std::int64_t k = b; k < e; ++k) {
          const float a = absmax(k) - offset;
          amax = (a < 0 ? -a : a) > amax ? (a < 0 ? -a : a) : amax;
        }
        absmax2(m) = amax;
        const float inv = 1.0f / amax;  // 0 when every absmax equals the mean: NaN -> index 0, as on CUDA
        for (std::int64_t k = b; k < e; ++k) {
          absmax_q(k) = static_cast<std::uint8_t>(dynamic_index(dyn, (absmax(k) - offset) * inv));
        }
      });
}

Nf4Tensor nf4_quantize(Unmanaged1<const float> src, std::vector<std::int64_t> shape, const std::string& name) {
  std::int64_t numel = 1;
  for (const std::int64_t d : shape) numel *= d;
  if (shape.empty() || numel != static_cast<std::int64_t>(src.extent(0))) {
    throw std::invalid_argument("nf4_quantize " + name + ": shape has " + std::to_string(numel) +
                                " values, the source " + std::to_string(src.extent(0)));
  }
  Nf4Tensor q;
  q.shape = std::move(shape);
  q.numel = numel;
  q.packed = View1<std::uint8_t>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "nf4_packed"), nf4_packed_bytes(numel));
  q.absmax_q = View1<std::uint8_t>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "nf4_absmax_q"), nf4_blocks(numel));
  q.absmax2 = View1<float>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "nf4_absmax2"), nf4_absmax_blocks(numel));
  View1<float> absmax(Kokkos::view_alloc(Kokkos::WithoutInitializing, "nf4_absmax"), nf4_blocks(numel));
  const std::int64_t bad =
      nf4_quantize_blocks(src, Unmanaged1<std::uint8_t>(q.packed.data(), q.packed.extent(0)),
                          Unmanaged1<float>(absmax.data(), absmax.extent(0)));
  if (bad > 0) {
    throw std::invalid_argument("nf4_quantize " + name + ": " + std::to_string(bad) + " of " + std::to_string(numel) +
                                " values are NaN or Inf; NF4 quantizes finite weights only");
  }
  const Unmanaged1<const float> am(absmax.data(), absmax.extent(0));
  q.offset = nf4_absmax_offset(am);
  nf4_quantize_absmax(am, q.offset, Unmanaged1<std::uint8_t>(q.absmax_q.data(), q.absmax_q.extent(0)),
                      Unmanaged1<float>(q.absmax2.data(), q.absmax2.extent(0)));
  return q;
}

void nf4_dequantize(Unmanaged1<const std::uint8_t> packed, Unmanaged1<const std::uint8_t> absmax_q,
                    Unmanaged1<const float> absmax2, float offset, Unmanaged1<float> dst) {
  dequantize_into(packed, absmax_q, absmax2, offset, dst);
}
void nf4_dequantize(Unmanaged1<const std::uint8_t> packed, Unmanaged1<const std::uint8_t> absmax_q,
                    Unmanaged1<const float> absmax2, float offset, Unmanaged1<bf16> dst) {
  dequantize_into(packed, absmax_q, absmax2, offset, dst);
}

namespace {
template <class Out>
void dequantize_tensor(const Nf4Tensor& q, Unmanaged1<Out> dst) {
  if (static_cast<std::int64_t>(dst.extent(0)) != q.numel) {
    throw std::invalid_argument("nf4_dequantize: destination has " + std::to_string(dst.extent(0)) +
                                " values, the tensor " + std::to_string(q.numel));
  }
  dequantize_into(Unmanaged1<const std::uint8_t>(q.packed.data(), q.packed.extent(0)),
                  Unmanaged1<const std::uint8_t>(q.absmax_q.data(), q.absmax_q.extent(0)),
                  Unmanaged1<const float>(q.absmax2.data(), q.absmax2.extent(0)), q.offset, dst);
}
}  // namespace

void nf4_dequantize(const Nf4Tensor& q, Unmanaged1<float> dst) { dequantize_tensor(q, dst); }
void nf4_dequantize(const Nf4Tensor& q, Unmanaged1<bf16> dst) { dequantize_tensor(q, dst); }

}  // namespace shardft
