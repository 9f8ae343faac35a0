#include "kernels/rope.hpp"
#include "kernels/bf16_pack.hpp"
#include "kernels/math.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardft {

namespace {
using Team = TeamLaunch;
using Member = Team::member_type;

// sign = +1 rotates by +a (forward), -1 by -a (backward). One team per token, its threads over the hd/2
// frequencies: each thread computes its angle once and rotates that pair in every head, so neighbouring
// threads touch neighbouring floats of a head (coalesced on a GPU). The float operations per pair are the
// one-thread-per-token loop's, so results are unchanged; Serial runs the same loop nest as before.
void rope_rotate(const char* name, Unmanaged2<float> x, Unmanaged1<const std::int32_t> pos, int head_dim,
                 double theta, double sign) {
  const int half = head_dim / 2;
  const int heads = static_cast<int>(x.extent(1)) / head_dim;
  const double log_theta = std::log(theta);
  Kokkos::parallel_for(
      name, Team(static_cast<int>(x.extent(0)), Kokkos::AUTO), KOKKOS_LAMBDA(const Member& m) {
        const int n = m.league_rank();
        const double p = pos(n);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, half), [&](const int i) {
          const double a = p * kmath::exp(-log_theta * (2.0 * i) / head_dim);
          const float c = static_cast<float>(kmath::cos(a));
          const float s = static_cast<float>(sign * kmath::sin(a));
          for (int h = 0; h < heads; ++h) {
            float* v = &x(n, h * head_dim);
            const float x1 = v[i], x2 = v[i + half];
            v[i] = x1 * c - x2 * s;
            v[i + half] = x2 * c + x1 * s;
          }
        });
      });
}
}  // namespace

void rope_forward(Unmanaged2<float> x, Unmanaged1<const std::int32_t> pos, int head_dim, double theta) {
  rope_rotate("rope_forward", x, pos, head_dim, theta, 1.0);
}

void rope_backward(Unmanaged2<float> dx, Unmanaged1<const std::int32_t> pos, int head_dim, double theta) {
  rope_rotate("rope_backward", dx, pos, head_dim, theta, -1.0);
}

}  // namespace shardft

namespace shardft {

std::vector<double> plain_rope_inv_freq(int head_dim, double theta) {
  std::vector<double> f(static_cast<std::size_t>(head_dim / 2));
  const double log_theta = std::log(theta);
  for (int i = 0; i < head_dim / 2; ++i) f[static_cast<std::size_t>(i)] = std::exp(-log_theta * (2.0 * i) / head_dim);
  return f;
}

RopeTable make_rope_table(std::int64_t positions, const std::vector<double>& inv_freq, double attention_scaling) {
  const int half = static_cast<int>(inv_freq.size());
  if (half < 1) throw std::invalid_argument("make_rope_table: no frequencies");
  RopeTable t{View2<float>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "rope_cos"), positions, half),
              View2<float>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "rope_sin"), positions, half),
              View1<double>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "rope_inv_freq"), half),
              attention_scaling, 2 * half};
  Kokkos::deep_copy(t.inv_freq, Kokkos::View<const double*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                    inv_freq.data(), inv_freq.size()));
  auto c = t.cos, s = t.sin;
  auto f = t.inv_freq;
  const double scale = attention_scaling;
  Kokkos::parallel_for(
      "rope_table", Range(0, positions), KOKKOS_LAMBDA(const std::int64_t p) {
        for (int i = 0; i < half; ++i) {
          const double a = static_cast<double>(p) * f(i);
          c(p, i) = static_cast<float>(kmath::cos(a) * scale);
          s(p, i) = static_cast<float>(kmath::sin(a) * scale);
        }
      });
  return t;
}

RopeTable make_rope_table(std::int64_t positions, int head_dim, double theta) {
  return make_rope_table(positions, plain_rope_inv_freq(head_dim, theta), 1.0);
}

namespace {
// Lanes per head on a GPU: the pairs of a head are contiguous, so a warp's lanes read consecutive
// floats; a power of two up to a warp (Kokkos' limit), no wider than the pairs.
int rope_lanes(int half) {
  int lanes = 1;
  while (lanes < half && lanes < 32) lanes *= 2;
  return lanes;
}
}  // namespace

namespace {
// A thread per pack of W pairs of one head of one token (W = 16 bytes of T: 8 bf16 or 4 fp32 pairs):
// N x heads x hd / (2 W) independent threads, each loading its x1, x2 and its cos / sin (the token's row
// of the table, which the token's heads share in cache) before it stores anything. A warp then has all
// its loads in flight at once: a team per token whose threads looped over the heads ordered each head's
// loads after the previous head's stores and ran at a fifth of the DRAM's bandwidth. The same float
// operations per pair as the other forms; positions beyond the table compute their angle per pair.
template <class T>
constexpr int rope_pack_width() {
  return static_cast<int>(16 / sizeof(T));
}
template <class T>
void rope_rotate_packed(const char* name, Strided2<T> q, Strided2<T> k, Unmanaged1<const std::int32_t> pos,
                        const RopeTable& table, bool inverse) {
  constexpr int W = rope_pack_width<T>();
  const int hd = table.head_dim, half = hd / 2, groups = half / W;
  const int q_heads = static_cast<int>(q.extent(1)) / hd, heads = q_heads + static_cast<int>(k.extent(1)) / hd;
  const std::int64_t per_token = static_cast<std::int64_t>(heads) * groups;
  const float sign = inverse ? -1.f : 1.f;
  const double scale = table.attention_scaling;
  const std::int64_t positions = static_cast<std::int64_t>(table.cos.extent(0));
  auto ct = table.cos, st = table.sin;
  auto f = table.inv_freq;
  Kokkos::parallel_for(
      name, Range(0, static_cast<std::int64_t>(q.extent(0)) * per_token), KOKKOS_LAMBDA(const std::int64_t i) {
        const std::int64_t n = i / per_token;
        const int r = static_cast<int>(i - n * per_token), h = r / groups, g = r - h * groups;
        const std::int64_t p = pos(n);
        T* v = h < q_heads ? &q(n, h * hd) : &k(n, (h - q_heads) * hd);
        float c[W], s[W], x1[W], x2[W];
        if (p >= 0 && p < positions) {
          load_floats<W>(&ct(p, g * W), c);
          load_floats<W>(&st(p, g * W), s);
        } else {  // beyond the table: the angle per pair, as the general kernel computes it
          for (int e = 0; e < W; ++e) {
            const double a = static_cast<double>(p) * f(g * W + e);
            c[e] = static_cast<float>(kmath::cos(a) * scale);
            s[e] = static_cast<float>(kmath::sin(a) * scale);
          }
        }
        load_floats<W>(v + g * W, x1);
        load_floats<W>(v + half + g * W, x2);
        float y1[W], y2[W];
        for (int e = 0; e < W; ++e) {
          const float se = sign * s[e];
          y1[e] = x1[e] * c[e] - x2[e] * se;
          y2[e] = x2[e] * c[e] + x1[e] * se;
        }
        store_floats<W>(v + g * W, y1);
        store_floats<W>(v + half + g * W, y2);
      });
}

// Whether rope_rotate_packed applies: heads of a multiple of W pairs, and every row of q, k and the
// table aligned to W elements.
template <class T>
bool rope_packs_fit(Strided2<T> q, Strided2<T> k, const RopeTable& table) {
  constexpr int W = rope_pack_width<T>();
  const int half = table.head_dim / 2;
  return half % W == 0 && q.stride_0() % W == 0 && k.stride_0() % W == 0 &&
         packs_fit<W>(half, {{q.data(), static_cast<int>(sizeof(T))}, {k.data(), static_cast<int>(sizeof(T))},
                             {table.cos.data(), 4}, {table.sin.data(), 4}});
}

// One head's pairs on the host: x1 = lo[i], x2 = hi[i]. Restrict pointers, so the compiler vectorises the
// loop (through a Kokkos lambda it cannot tell the stores from the table's loads, and widening and rounding
// bf16 one pair at a time ran about 1 ns per element).
template <class T>
inline void rotate_head_on_host(T* __restrict__ lo, T* __restrict__ hi, const float* __restrict__ c,
                                const float* __restrict__ s, float sign, int half) {
  for (int i = 0; i < half; ++i) {
    const float ci = c[i], si = sign * s[i];
    const float x1 = static_cast<float>(lo[i]), x2 = static_cast<float>(hi[i]);
    lo[i] = T(x1 * ci - x2 * si);
    hi[i] = T(x2 * ci + x1 * si);
  }
}

// The host's form of rope_rotate_qk_of below: a token per iteration, the same float operations per pair
// (so the same bits); a position beyond the table gets its row of cos and sin computed as the general
// kernel computes them.
template <class T>
void rope_rotate_on_host(const char* name, Strided2<T> q, Strided2<T> k, Unmanaged1<const std::int32_t> pos,
                         const RopeTable& table, bool inverse) {
  const int hd = table.head_dim, half = hd / 2;
  const int q_heads = static_cast<int>(q.extent(1)) / hd, heads = q_heads + static_cast<int>(k.extent(1)) / hd;
  const std::int64_t positions = static_cast<std::int64_t>(table.cos.extent(0));
  const float sign = inverse ? -1.f : 1.f;
  const double scale = table.attention_scaling;
  auto ct = table.cos, st = table.sin;
  auto f = table.inv_freq;
  Kokkos::parallel_for(name, Range(0, static_cast<std::int64_t>(q.extent(0))), [=](const std::int64_t n) {
    const std::int64_t p = pos(n);
    std::vector<float> own;  // only for a position beyond the table
    const float* c_row;
    const float* s_row;
    if (p >= 0 && p < positions) {
      c_row = &ct(p, 0);
      s_row = &st(p, 0);
    } else {
      own.resize(2 * static_cast<std::size_t>(half));
      for (int i = 0; i < half; ++i) {
        const double a = static_cast<double>(p) * f(i);
        own[i] = static_cast<float>(kmath::cos(a) * scale);
        own[half + i] = static_cast<float>(kmath::sin(a) * scale);
      }
      c_row = own.data();
      s_row = own.data() + half;
    }
    for (int h = 0; h < heads; ++h) {
      T* v = h < q_heads ? &q(n, h * hd) : &k(n, (h - q_heads) * hd);
      rotate_head_on_host(v, v + half, c_row, s_row, sign, half);
    }
  });
}

// Where packs do not fit (a head of fewer than W pairs, unaligned rows) on a GPU: one team per token, its
// threads over the q and k heads, each head's hd/2 pairs over the vector lanes. cos / sin come from the
// table (L1-resident: one row per token) for every head, so any head_dim works; positions beyond the
// table compute their angle per head. With plain RoPE's table, the same float operations as rope_forward /
// rope_backward, so the two paths agree bit for bit.
template <class T>
void rope_rotate_teams(const char* name, Strided2<T> q, Strided2<T> k, Unmanaged1<const std::int32_t> pos,
                       const RopeTable& table, bool inverse) {
  const int hd = table.head_dim, half = hd / 2;
  const int q_heads = static_cast<int>(q.extent(1)) / hd, heads = q_heads + static_cast<int>(k.extent(1)) / hd;
  const std::int64_t positions = static_cast<std::int64_t>(table.cos.extent(0));
  const float sign = inverse ? -1.f : 1.f;
  const double scale = table.attention_scaling;
  auto ct = table.cos, st = table.sin;
  auto f = table.inv_freq;
  Kokkos::parallel_for(
      name, Team(static_cast<int>(q.extent(0)), Kokkos::AUTO, rope_lanes(half)),
      KOKKOS_LAMBDA(const Member& m) {
        const int n = m.league_rank();
        const std::int64_t p = pos(n);
        // By value in the innermost loops: a float captured by reference might be one of the floats the
        // loop stores, so the host compiler would reload it and check overlaps on every head (the loop
        // ran 1.7x slower at head_dim 128).
        if (p >= 0 && p < positions) {
          const float* c_row = &ct(p, 0);
          const float* s_row = &st(p, 0);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(m, heads), [&](const int h) {
            T* v = h < q_heads ? &q(n, h * hd) : &k(n, (h - q_heads) * hd);
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(m, half), [=](const int i) {
              const float c = c_row[i], s = sign * s_row[i];
              const float x1 = static_cast<float>(v[i]), x2 = static_cast<float>(v[i + half]);
              v[i] = T(x1 * c - x2 * s);
              v[i + half] = T(x2 * c + x1 * s);
            });
          });
        } else {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(m, heads), [&](const int h) {
            T* v = h < q_heads ? &q(n, h * hd) : &k(n, (h - q_heads) * hd);
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(m, half), [=](const int i) {
              const double a = static_cast<double>(p) * f(i);
              const float c = static_cast<float>(kmath::cos(a) * scale);
              const float s = sign * static_cast<float>(kmath::sin(a) * scale);
              const float x1 = static_cast<float>(v[i]), x2 = static_cast<float>(v[i + half]);
              v[i] = T(x1 * c - x2 * s);
              v[i + half] = T(x2 * c + x1 * s);
            });
          });
        }
      });
}

// rope_rotate_qk's shapes: std::invalid_argument naming `name` where they do not fit.
template <class T>
void check_rope_qk(const char* name, Strided2<T> q, Strided2<T> k, Unmanaged1<const std::int32_t> pos,
                   const RopeTable& table) {
  const int hd = table.head_dim, half = hd / 2;
  if (q.stride_1() != 1 || k.stride_1() != 1) {
    throw std::invalid_argument(std::string(name) + ": each row of q and k must be contiguous");
  }
  if (hd < 2 || hd % 2 != 0) throw std::invalid_argument(std::string(name) + ": head_dim must be even and positive");
  if (q.extent(1) % hd != 0 || k.extent(1) % hd != 0 || k.extent(0) != q.extent(0) || pos.extent(0) != q.extent(0)) {
    throw std::invalid_argument(std::string(name) + ": q, k must be [N, heads * " + std::to_string(hd) + "], pos [N]");
  }
  if (table.cos.extent(0) > 0 && static_cast<int>(table.cos.extent(1)) != half) {
    throw std::invalid_argument(std::string(name) + ": table built for another head_dim");
  }
  if (static_cast<int>(table.inv_freq.extent(0)) != half) {
    throw std::invalid_argument(std::string(name) + ": table without head_dim / 2 frequencies");
  }
}

// q and k in fp32 or bf16 (a bf16 step's kept q and k): each pair read into fp32, rotated with the same
// float operations either way, and stored (rounded once in bf16).
template <class T>
void rope_rotate_qk_of(const char* name, Strided2<T> q, Strided2<T> k, Unmanaged1<const std::int32_t> pos,
                       const RopeTable& table, bool inverse) {
  check_rope_qk(name, q, k, pos, table);
  if constexpr (!kComputeOnDevice) {
    return rope_rotate_on_host(name, q, k, pos, table, inverse);
  }
  if (rope_packs_fit(q, k, table)) return rope_rotate_packed(name, q, k, pos, table, inverse);
  rope_rotate_teams(name, q, k, pos, table, inverse);
}

}  // namespace

void rope_rotate_qk(Unmanaged2<float> q, Unmanaged2<float> k, Unmanaged1<const std::int32_t> pos,
                    const RopeTable& table, bool inverse) {
  rope_rotate_qk_of<float>("rope_rotate_qk", q, k, pos, table, inverse);
}

void rope_rotate_qk(Strided2<bf16> q, Strided2<bf16> k, Unmanaged1<const std::int32_t> pos,
                    const RopeTable& table, bool inverse) {
  rope_rotate_qk_of<bf16>("rope_rotate_qk_bf16", q, k, pos, table, inverse);
}

void rope_rotate_qk_packed(Strided2<bf16> q, Strided2<bf16> k, Unmanaged1<const std::int32_t> pos,
                           const RopeTable& table, bool inverse) {
  check_rope_qk("rope_rotate_qk_packed", q, k, pos, table);
  if (!rope_packs_fit(q, k, table)) {
    throw std::invalid_argument("rope_rotate_qk_packed: heads of a multiple of 8 pairs and 16-byte aligned rows needed");
  }
  rope_rotate_packed("rope_rotate_qk_bf16", q, k, pos, table, inverse);
}

}  // namespace shardft
