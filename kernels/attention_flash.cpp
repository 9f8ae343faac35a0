// FlashAttention-2 in Kokkos teams. Math, shapes and the work split: kernels/attention_flash.hpp.
//
// Inside a team every phase is a TeamThreadRange over the flattened tile (row, column) pairs, with a
// team barrier between phases; the row-wise softmax steps run one thread per query row over the key tile.
// Tiles in scratch are stored with a leading dimension of hd + 1: in the score phase neighbouring threads
// read neighbouring rows of one tile, and with ld = hd (a multiple of 32) all of a warp's reads would fall
// in one shared-memory bank.
#include "kernels/attention_flash.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "kernels/math.hpp"

namespace shardft {

namespace {

using TeamPolicy = TeamLaunch;
using Team = TeamPolicy::member_type;
using Scratch = Kokkos::View<float*, ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
using Ids = Unmanaged1<const std::int32_t>;

constexpr std::size_t kScratchCap = 40 * 1024;

std::size_t scratch_bytes(std::initializer_list<std::int64_t> sizes) {
  std::size_t total = 0;
  for (std::int64_t n : sizes) total += Scratch::shmem_size(static_cast<std::size_t>(n));
  return total;
}

// Team scratch of each kernel: the tiles (ld = hd + 1), the score tile(s) and per-query-row values.
std::size_t forward_scratch(FlashTiles t, int hd) {
  const std::int64_t bq = t.query_rows, bk = t.key_cols, ld = hd + 1;
  return scratch_bytes({bq * ld, bk * ld, bk * ld, bq * bk, bq, bq, bq});  // Q K V S m l a
}
std::size_t dq_scratch(FlashTiles t, int hd) {
  const std::int64_t bq = t.query_rows, bk = t.key_cols, ld = hd + 1;
  return scratch_bytes({bq * ld, bq * ld, bk * ld, bk * ld, bq * bk, bq, bq});  // Q dO K V dS lse D
}
std::size_t dkv_scratch(FlashTiles t, int hd) {
  const std::int64_t bq = t.query_rows, bk = t.key_cols, ld = hd + 1;
  return scratch_bytes({bk * ld, bk * ld, bq * ld, bq * ld, bq * bk, bq * bk, bq, bq});  // K V Q dO P dS lse D
}

std::size_t team_scratch_max() { return static_cast<std::size_t>(TeamPolicy::scratch_size_max(0)); }

TeamPolicy team_policy(int league, FlashTiles t, std::size_t scratch) {
  TeamPolicy policy = t.team_size > 0 ? TeamPolicy(league, t.team_size) : TeamPolicy(league, Kokkos::AUTO);
  policy.set_scratch_size(0, Kokkos::PerTeam(scratch));
  return policy;
}

FlashTiles pick_tiles(std::size_t (*bytes)(FlashTiles, int), int hd) {
  const std::size_t limit = std::min(kScratchCap, team_scratch_max());
  for (int b = 64; b >= 1; b /= 2) {
    for (FlashTiles t : {FlashTiles{b, b}, FlashTiles{b, std::max(1, b / 2)}}) {
      if (bytes(t, hd) <= limit) return t;
    }
  }
  throw std::invalid_argument("attention: head_dim " + std::to_string(hd) + " needs more team scratch than the " +
                              std::to_string(limit) + " bytes this execution space gives one team");
}

// The requested tiles, or the picked ones when none are given; requested tiles must fit the team scratch.
FlashTiles resolve_tiles(FlashTiles asked, std::size_t (*bytes)(FlashTiles, int), int hd, const char* kernel) {
  if (asked.query_rows == 0 && asked.key_cols == 0) {
    FlashTiles picked = pick_tiles(bytes, hd);
    picked.team_size = asked.team_size;
    return picked;
  }
  if (asked.query_rows < 1 || asked.key_cols < 1) {
    throw std::invalid_argument(std::string(kernel) + ": tiles must be at least 1 x 1, got " +
                                std::to_string(asked.query_rows) + " x " + std::to_string(asked.key_cols));
  }
  if (bytes(asked, hd) > team_scratch_max()) {
    throw std::invalid_argument(std::string(kernel) + ": tiles " + std::to_string(asked.query_rows) + " x " +
                                std::to_string(asked.key_cols) + " at head_dim " + std::to_string(hd) + " need " +
                                std::to_string(bytes(asked, hd)) + " bytes of team scratch, more than the " +
                                std::to_string(team_scratch_max()) + " available");
  }
  return asked;
}

void check_shapes(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                  Unmanaged2<const float> v, Ids seq_ids, const char* kernel) {
  const std::int64_t rows = static_cast<std::int64_t>(s.batch) * s.seq;
  const bool ok = s.heads > 0 && s.kv_heads > 0 && s.heads % s.kv_heads == 0 && s.head_dim > 0 &&
                  static_cast<std::int64_t>(q.extent(0)) == rows &&
                  static_cast<std::int64_t>(q.extent(1)) == static_cast<std::int64_t>(s.heads) * s.head_dim &&
                  k.extent(0) == q.extent(0) && v.extent(0) == q.extent(0) && k.extent(1) == v.extent(1) &&
                  static_cast<std::int64_t>(k.extent(1)) == static_cast<std::int64_t>(s.kv_heads) * s.head_dim &&
                  static_cast<std::int64_t>(seq_ids.extent(0)) == rows;
  if (!ok) throw std::invalid_argument(std::string(kernel) + ": views do not match the attention shape");
}

KOKKOS_INLINE_FUNCTION float dot(const float* a, const float* b, int n) {
  float s = 0.f;
  for (int e = 0; e < n; ++e) s += a[e] * b[e];
  return s;
}

// [lo, hi] of the seq ids of rows first .. first + n - 1, known to every thread of the team.
KOKKOS_INLINE_FUNCTION void seq_range(const Team& team, const Ids& ids, std::int64_t first, int n, int& lo, int& hi) {
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(team, n), [&](const int r, int& m) { m = ids(first + r) < m ? ids(first + r) : m; },
      Kokkos::Min<int>(lo));
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(team, n), [&](const int r, int& m) { m = ids(first + r) > m ? ids(first + r) : m; },
      Kokkos::Max<int>(hi));
}

// Rows first .. first + n - 1, columns col .. col + hd - 1 of x, times factor, into dst (ld = hd + 1).
KOKKOS_INLINE_FUNCTION void load_tile(const Team& team, const Unmanaged2<const float>& x, std::int64_t first, int n,
                                      int col, int hd, float factor, const Scratch& dst) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n * hd), [&](const int i) {
    const int r = i / hd, e = i % hd;
    dst(r * (hd + 1) + e) = x(first + r, col + e) * factor;
  });
}

// The query tile a team of the forward or dq kernel owns: league rank = (b * H + h) * query_tiles + qt.
struct QueryTile {
  int h, g, i0, nq;
  std::int64_t base, lse_base;  // first row of sample b in q / o; first (b, h) entry of lse / delta
};
KOKKOS_INLINE_FUNCTION QueryTile query_tile(int league_rank, int query_tiles, int H, int T, int group, int Bq) {
  const int qt = league_rank % query_tiles, h = (league_rank / query_tiles) % H;
  const std::int64_t b = league_rank / (query_tiles * H);
  const int i0 = qt * Bq;
  return {h, h / group, i0, T - i0 < Bq ? T - i0 : Bq, b * T, (b * H + h) * T};
}

// Key tile j0 .. j0 + nk - 1 of kv head g (nk up to Bk, ending at last_key) staged into Ks, Vs, unless its
// seq ids cannot meet the query tile's [qlo, qhi]. Returns nk, or 0 for a skipped tile (nothing loaded).
KOKKOS_INLINE_FUNCTION int stage_key_tile(const Team& team, const Ids& seq_ids, const Unmanaged2<const float>& k,
                                          const Unmanaged2<const float>& v, std::int64_t base, int j0, int last_key,
                                          int Bk, int g, int hd, int qlo, int qhi, const Scratch& Ks,
                                          const Scratch& Vs) {
  const int nk = last_key + 1 - j0 < Bk ? last_key + 1 - j0 : Bk;
  int klo = 0, khi = 0;
  seq_range(team, seq_ids, base + j0, nk, klo, khi);
  if (khi < qlo || klo > qhi) return 0;
  load_tile(team, k, base + j0, nk, g * hd, hd, 1.f, Ks);
  load_tile(team, v, base + j0, nk, g * hd, hd, 1.f, Vs);
  return nk;
}

}  // namespace

FlashTilePlan flash_tile_plan(int head_dim) {
  return {pick_tiles(forward_scratch, head_dim), pick_tiles(dq_scratch, head_dim), pick_tiles(dkv_scratch, head_dim)};
}

void attention_forward_lse_flash(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                 Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                 Unmanaged2<float> o, Unmanaged1<float> lse, FlashTiles tiles) {
  check_shapes(s, q, k, v, seq_ids, "attention_forward_lse_flash");
  const FlashTiles t = resolve_tiles(tiles, forward_scratch, s.head_dim, "attention_forward_lse_flash");
  const int T = s.seq, H = s.heads, hd = s.head_dim, ld = hd + 1, group = s.heads / s.kv_heads;
  const int Bq = t.query_rows, Bk = t.key_cols, query_tiles = (T + Bq - 1) / Bq;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  const TeamPolicy policy = team_policy(s.batch * H * query_tiles, t, forward_scratch(t, hd));
  Kokkos::parallel_for(
      "attention_forward_lse_flash", policy, KOKKOS_LAMBDA(const Team& team) {
        const QueryTile tile = query_tile(team.league_rank(), query_tiles, H, T, group, Bq);
        const int h = tile.h, g = tile.g, i0 = tile.i0, nq = tile.nq;
        const std::int64_t base = tile.base, lse_base = tile.lse_base;
        Scratch Qs(team.team_scratch(0), Bq * ld), Ks(team.team_scratch(0), Bk * ld),
            Vs(team.team_scratch(0), Bk * ld), S(team.team_scratch(0), Bq * Bk), m(team.team_scratch(0), Bq),
            l(team.team_scratch(0), Bq), a(team.team_scratch(0), Bq);
        load_tile(team, q, base + i0, nq, h * hd, hd, scale, Qs);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq * hd),
                             [&](const int x) { o(base + i0 + x / hd, h * hd + x % hd) = 0.f; });
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq), [&](const int r) {
          m(r) = -INFINITY;
          l(r) = 0.f;
        });
        int qlo = 0, qhi = 0;
        seq_range(team, seq_ids, base + i0, nq, qlo, qhi);
        team.team_barrier();
        const int last_key = i0 + nq - 1;  // keys after the tile's last query are never visible
        for (int j0 = 0; j0 <= last_key; j0 += Bk) {
          const int nk = stage_key_tile(team, seq_ids, k, v, base, j0, last_key, Bk, g, hd, qlo, qhi, Ks, Vs);
          if (nk == 0) continue;
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq * nk), [&](const int x) {
            const int r = x / nk, c = x % nk, i = i0 + r, j = j0 + c;
            const bool visible = j <= i && seq_ids(base + j) == seq_ids(base + i);
            S(r * Bk + c) = visible ? dot(&Qs(r * ld), &Ks(c * ld), hd) : -INFINITY;
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq), [&](const int r) {
            float mx = m(r);
            for (int c = 0; c < nk; ++c) mx = S(r * Bk + c) > mx ? S(r * Bk + c) : mx;
            if (mx == -INFINITY) {  // nothing visible yet: O and l stay 0
              a(r) = 1.f;
              for (int c = 0; c < nk; ++c) S(r * Bk + c) = 0.f;
              return;
            }
            float sum = 0.f;
            for (int c = 0; c < nk; ++c) {
              const float p = kmath::exp(S(r * Bk + c) - mx);
              S(r * Bk + c) = p;
              sum += p;
            }
            a(r) = kmath::exp(m(r) - mx);
            l(r) = l(r) * a(r) + sum;
            m(r) = mx;
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq * hd), [&](const int x) {
            const int r = x / hd, e = x % hd;
            float acc = o(base + i0 + r, h * hd + e) * a(r);
            for (int c = 0; c < nk; ++c) acc += S(r * Bk + c) * Vs(c * ld + e);
            o(base + i0 + r, h * hd + e) = acc;
          });
          team.team_barrier();
        }
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq * hd), [&](const int x) {
          const int r = x / hd, e = x % hd;
          o(base + i0 + r, h * hd + e) /= l(r);
        });
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq),
                             [&](const int r) { lse(lse_base + i0 + r) = m(r) + kmath::log(l(r)); });
      });
}

// The backward's passes, each one parallel region (external linkage: nvcc's extended lambdas need a
// named enclosing function whose address can be taken).
// D_i = dO_i . O_i for every (b, h, i), indexed like lse.
void flash_backward_delta(const AttentionShape& s, Unmanaged2<const float> o, Unmanaged2<const float> dout,
                          Unmanaged1<float> delta) {
  const int T = s.seq, H = s.heads, hd = s.head_dim;
  Kokkos::parallel_for(
      "attention_backward_lse_flash_delta", Range(0, static_cast<std::int64_t>(s.batch) * H * T),
      KOKKOS_LAMBDA(const std::int64_t idx) {
        const std::int64_t row = idx / (static_cast<std::int64_t>(H) * T) * T + idx % T;
        const int h = static_cast<int>((idx / T) % H);
        delta(idx) = dot(&dout(row, h * hd), &o(row, h * hd), hd);
      });
}

// dq: a team per (b, h, query tile).
void flash_backward_dq(const AttentionShape& s, const FlashTiles& tq, Unmanaged2<const float> q,
                       Unmanaged2<const float> k, Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                       Unmanaged1<const float> lse, Unmanaged2<const float> dout, Unmanaged1<const float> delta,
                       Unmanaged2<float> dq) {
  const int T = s.seq, H = s.heads, hd = s.head_dim, ld = hd + 1, group = s.heads / s.kv_heads;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  const int Bq = tq.query_rows, Bk = tq.key_cols, query_tiles = (T + Bq - 1) / Bq;
  const TeamPolicy policy = team_policy(s.batch * H * query_tiles, tq, dq_scratch(tq, hd));
  Kokkos::parallel_for(
      "attention_backward_lse_flash_dq", policy, KOKKOS_LAMBDA(const Team& team) {
        const QueryTile tile = query_tile(team.league_rank(), query_tiles, H, T, group, Bq);
        const int h = tile.h, g = tile.g, i0 = tile.i0, nq = tile.nq;
        const std::int64_t base = tile.base, lse_base = tile.lse_base;
        Scratch Qs(team.team_scratch(0), Bq * ld), dOs(team.team_scratch(0), Bq * ld),
            Ks(team.team_scratch(0), Bk * ld), Vs(team.team_scratch(0), Bk * ld), dS(team.team_scratch(0), Bq * Bk),
            L(team.team_scratch(0), Bq), D(team.team_scratch(0), Bq);
        load_tile(team, q, base + i0, nq, h * hd, hd, scale, Qs);
        load_tile(team, dout, base + i0, nq, h * hd, hd, 1.f, dOs);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq * hd),
                             [&](const int x) { dq(base + i0 + x / hd, h * hd + x % hd) = 0.f; });
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq), [&](const int r) {
          L(r) = lse(lse_base + i0 + r);
          D(r) = delta(lse_base + i0 + r);
        });
        int qlo = 0, qhi = 0;
        seq_range(team, seq_ids, base + i0, nq, qlo, qhi);
        team.team_barrier();
        const int last_key = i0 + nq - 1;
        for (int j0 = 0; j0 <= last_key; j0 += Bk) {
          const int nk = stage_key_tile(team, seq_ids, k, v, base, j0, last_key, Bk, g, hd, qlo, qhi, Ks, Vs);
          if (nk == 0) continue;
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq * nk), [&](const int x) {
            const int r = x / nk, c = x % nk, i = i0 + r, j = j0 + c;
            float ds = 0.f;
            if (j <= i && seq_ids(base + j) == seq_ids(base + i)) {
              const float p = kmath::exp(dot(&Qs(r * ld), &Ks(c * ld), hd) - L(r));
              ds = p * (dot(&dOs(r * ld), &Vs(c * ld), hd) - D(r));
            }
            dS(r * Bk + c) = ds;
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq * hd), [&](const int x) {
            const int r = x / hd, e = x % hd;
            float acc = 0.f;
            for (int c = 0; c < nk; ++c) acc += dS(r * Bk + c) * Ks(c * ld + e);
            dq(base + i0 + r, h * hd + e) += scale * acc;
          });
          team.team_barrier();
        }
      });
}

// dk, dv: a team per (b, g, key tile).
void flash_backward_dkv(const AttentionShape& s, const FlashTiles& tkv, Unmanaged2<const float> q,
                        Unmanaged2<const float> k, Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                        Unmanaged1<const float> lse, Unmanaged2<const float> dout, Unmanaged1<const float> delta,
                        Unmanaged2<float> dk, Unmanaged2<float> dv) {
  const int T = s.seq, H = s.heads, G = s.kv_heads, hd = s.head_dim, ld = hd + 1, group = s.heads / s.kv_heads;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  const int Bq = tkv.query_rows, Bk = tkv.key_cols, key_tiles = (T + Bk - 1) / Bk;
  const TeamPolicy policy = team_policy(s.batch * G * key_tiles, tkv, dkv_scratch(tkv, hd));
  Kokkos::parallel_for(
      "attention_backward_lse_flash_dkv", policy, KOKKOS_LAMBDA(const Team& team) {
        const int kt = team.league_rank() % key_tiles;
        const int g = (team.league_rank() / key_tiles) % G;
        const std::int64_t b = team.league_rank() / (key_tiles * G), base = b * T;
        const int j0 = kt * Bk, nk = T - j0 < Bk ? T - j0 : Bk;
        Scratch Ks(team.team_scratch(0), Bk * ld), Vs(team.team_scratch(0), Bk * ld),
            Qs(team.team_scratch(0), Bq * ld), dOs(team.team_scratch(0), Bq * ld), P(team.team_scratch(0), Bq * Bk),
            dS(team.team_scratch(0), Bq * Bk), L(team.team_scratch(0), Bq), D(team.team_scratch(0), Bq);
        load_tile(team, k, base + j0, nk, g * hd, hd, 1.f, Ks);
        load_tile(team, v, base + j0, nk, g * hd, hd, 1.f, Vs);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nk * hd), [&](const int x) {
          dk(base + j0 + x / hd, g * hd + x % hd) = 0.f;
          dv(base + j0 + x / hd, g * hd + x % hd) = 0.f;
        });
        int klo = 0, khi = 0;
        seq_range(team, seq_ids, base + j0, nk, klo, khi);
        for (int h = g * group; h < (g + 1) * group; ++h) {
          const std::int64_t lse_base = (b * H + h) * T;
          for (int i0 = j0 / Bq * Bq; i0 < T; i0 += Bq) {  // query tiles holding a query at or after j0
            const int nq = T - i0 < Bq ? T - i0 : Bq;
            int qlo = 0, qhi = 0;
            seq_range(team, seq_ids, base + i0, nq, qlo, qhi);
            if (khi < qlo || klo > qhi) continue;
            team.team_barrier();  // the previous tile's readers of Qs, dOs, P, dS are done
            load_tile(team, q, base + i0, nq, h * hd, hd, scale, Qs);
            load_tile(team, dout, base + i0, nq, h * hd, hd, 1.f, dOs);
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq), [&](const int r) {
              L(r) = lse(lse_base + i0 + r);
              D(r) = delta(lse_base + i0 + r);
            });
            team.team_barrier();
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nk * nq), [&](const int x) {
              const int c = x / nq, r = x % nq, i = i0 + r, j = j0 + c;
              float p = 0.f, ds = 0.f;
              if (j <= i && seq_ids(base + j) == seq_ids(base + i)) {
                p = kmath::exp(dot(&Qs(r * ld), &Ks(c * ld), hd) - L(r));
                ds = p * (dot(&dOs(r * ld), &Vs(c * ld), hd) - D(r));
              }
              P(c * Bq + r) = p;
              dS(c * Bq + r) = ds;
            });
            team.team_barrier();
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nk * hd), [&](const int x) {
              const int c = x / hd, e = x % hd;
              float acc_v = 0.f, acc_k = 0.f;
              for (int r = 0; r < nq; ++r) {
                acc_v += P(c * Bq + r) * dOs(r * ld + e);
                acc_k += dS(c * Bq + r) * Qs(r * ld + e);
              }
              dv(base + j0 + c, g * hd + e) += acc_v;
              dk(base + j0 + c, g * hd + e) += acc_k;
            });
          }
        }
      });
}

void attention_backward_lse_flash(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                  Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                  Unmanaged2<const float> o, Unmanaged1<const float> lse,
                                  Unmanaged2<const float> dout, Unmanaged2<float> dq, Unmanaged2<float> dk,
                                  Unmanaged2<float> dv, Unmanaged1<float> delta, FlashTiles tiles) {
  check_shapes(s, q, k, v, seq_ids, "attention_backward_lse_flash");
  const FlashTiles tq = resolve_tiles(tiles, dq_scratch, s.head_dim, "attention_backward_lse_flash");
  const FlashTiles tkv = resolve_tiles(tiles, dkv_scratch, s.head_dim, "attention_backward_lse_flash");
  flash_backward_delta(s, o, dout, delta);
  flash_backward_dq(s, tq, q, k, v, seq_ids, lse, dout, delta, dq);
  flash_backward_dkv(s, tkv, q, k, v, seq_ids, lse, dout, delta, dk, dv);
}

}  // namespace shardft
