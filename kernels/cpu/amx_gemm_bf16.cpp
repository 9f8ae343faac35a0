// bf16 x bf16 -> fp32 GEMM on AMX tiles (kernels/amx_gemm_bf16.hpp). Compiled with -mamx-tile -mamx-bf16
// where the compiler has them (CMakeLists.txt); every AMX instruction runs only after available().
//
// One TDPBF16PS multiplies a 16 x 32 bf16 tile of A by a 32 x 16 tile of B into a 16 x 16 fp32 tile of C:
//   C[i][j] += sum_{p<16} A[i][2p] B[2p][j] + A[i][2p+1] B[2p+1][j]
// B's tile is stored pair-interleaved ("VNNI"): row p holds (B[2p][j], B[2p+1][j]) for j = 0..15.
// The micro-kernel keeps a 32 x 32 block of C in four tiles; two A tiles and two B tiles feed the four
// products of each 32-wide step of K, so every tile loaded is used twice.
//
// Packing: op(A) into [row pair][K chunk][2 tiles of 16 x 32] and op(B) into [column pair][K chunk][2 VNNI
// tiles], zero-padded to multiples of 32 in M, N and K, so the micro-kernel has no edge cases and walks
// each operand contiguously. Blocks of B's column pairs that fit half the L2 are reused across all row
// pairs; one row pair's A strip is reused across the block's columns.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/amx_gemm_bf16.hpp"
#include "kernels/bf16.hpp"
#include "kernels/blas_core.hpp"

// The hot functions use AVX-512 as well: every CPU with AMX has it, and only such a CPU runs them. The
// rest of the file (available(), describe()) stays at the build's instruction set.
#define SHARDFT_AMX_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,amx-tile,amx-bf16")))

namespace shardft::amx {

namespace {

constexpr int kTileElements = 512;  // 16 rows x 64 bytes of bf16
constexpr std::size_t kBBlockBytes = std::size_t{1} << 20;

struct TileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};

// Linux hands out the AMX tile data state only to a process that asks (arch_prctl, Linux 5.16+).
std::string grant_tile_state() {
  const CpuFeatures f = host_cpu_features();
  if (!f.amx_bf16) return "the CPU has no AMX-BF16";
  if (!f.avx512bw || !f.avx512vl) return "the CPU has AMX but not AVX-512 BW and VL";
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr int kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) != 0) return "the OS refused the AMX tile state";
  return "";
#else
  return "AMX needs Linux's arch_prctl";
#endif
}

struct State {
  std::string refusal = grant_tile_state();
  bool enabled = refusal.empty();
};
State& state() {
  static State s;
  return s;
}

SHARDFT_AMX_TARGET void configure_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.bytes_per_row[t] = 64;
  }
  _tile_loadconfig(&cfg);
}

int round_up(int x, int to) { return (x + to - 1) / to * to; }

// `elements` bf16 slots in `buffer` (grown as needed, kept for the next call) from its first 64-byte line.
std::uint16_t* cache_aligned(std::vector<std::uint16_t>& buffer, std::size_t elements) {
  buffer.resize(elements + 32);
  const auto at = (reinterpret_cast<std::uintptr_t>(buffer.data()) + 63) & ~std::uintptr_t{63};
  return reinterpret_cast<std::uint16_t*>(at);
}

// Where element (i, kk) of op(A) goes: row pairs outermost, then K chunks, then the pair's two tiles.
std::size_t a_slot(int i, int kk, int chunks) {
  return (static_cast<std::size_t>(i / 32) * chunks * 2 + static_cast<std::size_t>(kk / 32) * 2 + (i / 16) % 2) *
             kTileElements + (i % 16) * 32 + kk % 32;
}

// op(A)[m, k] (row-major a with stride lda; trans: a is [k, m]) into 16 x 32 tiles. The padding (rows
// m..mp, columns k..kp) is zeroed first, every element once.
SHARDFT_AMX_TARGET void pack_a(bool trans, const std::uint16_t* a, int lda, int m, int k, int mp, int kp, std::uint16_t* out) {
  const int chunks = kp / 32;
  if (k < kp || m < mp) std::fill(out, out + static_cast<std::size_t>(mp) * kp, std::uint16_t{0});
  if (!trans) {
    for (int i = 0; i < m; ++i) {
      const std::uint16_t* src = a + static_cast<std::size_t>(i) * lda;
      for (int c = 0; c * 32 < k; ++c) {
        std::memcpy(out + a_slot(i, c * 32, chunks), src + c * 32, sizeof(std::uint16_t) * std::min(32, k - c * 32));
      }
    }
    return;
  }
  // a's rows are K. Rows kk, kk + 1 of a 16-column block make 16 words (a[kk][i], a[kk+1][i]); 16 such
  // word vectors are a 16 x 16 word matrix whose transpose is the tile: row i holds K pairs 0..15.
  alignas(64) std::uint32_t words[16 * 16];
  for (int i0 = 0; i0 < m; i0 += 16) {
    const __mmask16 cols = static_cast<__mmask16>(m - i0 >= 16 ? 0xffff : (1u << (m - i0)) - 1);
    for (int k0 = 0; k0 < k; k0 += 32) {
      for (int p = 0; p < 16; ++p) {
        const int kk = k0 + 2 * p;
        const __m256i lo = kk < k ? _mm256_maskz_loadu_epi16(cols, a + static_cast<std::size_t>(kk) * lda + i0)
                                  : _mm256_setzero_si256();
        const __m256i hi = kk + 1 < k ? _mm256_maskz_loadu_epi16(cols, a + static_cast<std::size_t>(kk + 1) * lda + i0)
                                      : _mm256_setzero_si256();
        _mm512_store_si512(words + p * 16, _mm512_or_si512(_mm512_cvtepu16_epi32(lo),
                                                            _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16)));
      }
      auto* tile = reinterpret_cast<std::uint32_t*>(out + a_slot(i0, k0, chunks));
      for (int i = 0; i < 16; ++i) {
        const __m512i column = _mm512_i32gather_epi32(_mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160,
                                                                        176, 192, 208, 224, 240),
                                                      words + i, 4);
        _mm512_storeu_si512(tile + i * 16, column);
      }
    }
  }
}

// op(B)[k, n] (row-major b with stride ldb; trans: b is [n, k]) into VNNI tiles: 32-bit word (p, j) of a
// tile is the pair (B[2p][j], B[2p+1][j]). Column pairs outermost, then K chunks, then the pair's tiles.
SHARDFT_AMX_TARGET void pack_b(bool trans, const std::uint16_t* b, int ldb, int n, int k, int np, int kp, std::uint16_t* out) {
  const int chunks = kp / 32;
  if (k < kp || n < np) std::fill(out, out + static_cast<std::size_t>(np) * kp, std::uint16_t{0});
  auto word = [&](int j, int kk) {  // the 32-bit word holding rows kk, kk + 1 (kk even) of column j
    return reinterpret_cast<std::uint32_t*>(out + a_slot(j, 0, chunks) - (j % 16) * 32 +
                                            static_cast<std::size_t>(kk / 32) * 2 * kTileElements) +
           ((kk % 32) / 2) * 16 + j % 16;
  };
  auto at = [&](int j, int kk) -> std::uint32_t {
    const std::uint16_t* x = trans ? b + static_cast<std::size_t>(j) * ldb + kk : b + static_cast<std::size_t>(kk) * ldb + j;
    return kk < k ? *x : 0u;
  };
  if (trans) {
    for (int j = 0; j < n; ++j) {
      const std::uint16_t* src = b + static_cast<std::size_t>(j) * ldb;
      for (int kk = 0; kk + 1 < k; kk += 2) *word(j, kk) = src[kk] | static_cast<std::uint32_t>(src[kk + 1]) << 16;
      if (k % 2) *word(j, k - 1) = at(j, k - 1);
    }
    return;
  }
  for (int kk = 0; kk < k; kk += 2) {
    const std::uint16_t* r0 = b + static_cast<std::size_t>(kk) * ldb;
    const std::uint16_t* r1 = r0 + ldb;
    for (int j0 = 0; j0 < n; j0 += 16) {
      std::uint32_t* dst = word(j0, kk);
      const int cols = std::min(16, n - j0);
      if (kk + 1 < k) {
        for (int j = 0; j < cols; ++j) dst[j] = r0[j0 + j] | static_cast<std::uint32_t>(r1[j0 + j]) << 16;
      } else {
        for (int j = 0; j < cols; ++j) dst[j] = r0[j0 + j];
      }
    }
  }
}

// fp32 -> bf16 bits, round to nearest even, a NaN kept quiet with its payload: bf16::round_bits on 16 lanes.
SHARDFT_AMX_TARGET __m256i round_to_bf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
}

// The 32 x 32 block of C at rows i0, columns j0 (a block of op(A) op(B) in `acc`) into C, 16 columns a time.
SHARDFT_AMX_TARGET void write_block(const float* acc, int i0, int j0, int m, int n, float alpha, float beta, float* c,
                                    std::uint16_t* c_bf16, int ldc) {
  const int rows = std::min(32, m - i0);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int h = 0; h < 2 && j0 + 16 * h < n; ++h) {
    const int cols = std::min(16, n - j0 - 16 * h);
    const __mmask16 mask = static_cast<__mmask16>(cols == 16 ? 0xffff : (1u << cols) - 1);
    for (int r = 0; r < rows; ++r) {
      const __m512 v = _mm512_mul_ps(va, _mm512_load_ps(acc + r * 32 + 16 * h));
      const std::size_t at = static_cast<std::size_t>(i0 + r) * ldc + j0 + 16 * h;
      if (c_bf16) {
        _mm256_mask_storeu_epi16(c_bf16 + at, mask, round_to_bf16(v));
      } else if (beta == 0.f) {
        _mm512_mask_storeu_ps(c + at, mask, v);
      } else {
        _mm512_mask_storeu_ps(c + at, mask, _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask, c + at), v));
      }
    }
  }
}

// acc[32 x 32] = A's row pair strip times B's column pair strip over `chunks` steps of 32.
SHARDFT_AMX_TARGET void micro_kernel(const std::uint16_t* a, const std::uint16_t* b, int chunks, float* acc) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int q = 0; q < chunks; ++q) {
    const std::uint16_t* aq = a + static_cast<std::size_t>(q) * 2 * kTileElements;
    const std::uint16_t* bq = b + static_cast<std::size_t>(q) * 2 * kTileElements;
    _tile_loadd(4, aq, 64);
    _tile_loadd(6, bq, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_loadd(7, bq + kTileElements, 64);
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(5, aq + kTileElements, 64);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, acc, 128);
  _tile_stored(1, acc + 16, 128);
  _tile_stored(2, acc + 16 * 32, 128);
  _tile_stored(3, acc + 16 * 32 + 16, 128);
}

// The product on packed tiles; gemm_bf16's body, under the AMX target.
SHARDFT_AMX_TARGET void product_on_tiles(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                                         const std::uint16_t* a, int lda, const std::uint16_t* b, int ldb, float beta,
                                         float* c, std::uint16_t* c_bf16, int ldc) {
  if (m <= 0 || n <= 0) return;
  const int mp = round_up(m, 32), np = round_up(n, 32), kp = round_up(std::max(k, 1), 32), chunks = kp / 32;
  // Tiles start on cache lines: a tile row that straddles two lines costs two loads.
  thread_local std::vector<std::uint16_t> a_buffer, b_buffer;
  std::uint16_t* const a_packed = cache_aligned(a_buffer, static_cast<std::size_t>(mp) * kp);
  std::uint16_t* const b_packed = cache_aligned(b_buffer, static_cast<std::size_t>(np) * kp);
  pack_a(trans_a, a, lda, m, k, mp, kp, a_packed);
  pack_b(trans_b, b, ldb, n, k, np, kp, b_packed);
  const std::size_t strip = static_cast<std::size_t>(chunks) * 2 * kTileElements;  // one pair's tiles
  const int pairs_per_block = std::max<int>(1, static_cast<int>(kBBlockBytes / (strip * sizeof(std::uint16_t))));
  alignas(64) float acc[32 * 32];
  configure_tiles();
  for (int jb = 0; jb < np / 32; jb += pairs_per_block) {
    const int jb_end = std::min(np / 32, jb + pairs_per_block);
    for (int ip = 0; ip < mp / 32; ++ip) {
      for (int jp = jb; jp < jb_end; ++jp) {
        micro_kernel(a_packed + ip * strip, b_packed + jp * strip, chunks, acc);
        write_block(acc, ip * 32, jp * 32, m, n, alpha, beta, c, c_bf16, ldc);
      }
    }
  }
  _tile_release();
}

}  // namespace

bool available() { return state().enabled; }

std::string describe() {
  const State& s = state();
  if (!s.refusal.empty()) return "no AMX (" + s.refusal + ")";
  return s.enabled ? "AMX bf16 tiles" : "AMX bf16 tiles (turned off)";
}

void set_enabled(bool on) { state().enabled = on && state().refusal.empty(); }

void gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const std::uint16_t* a, int lda,
               const std::uint16_t* b, int ldb, float beta, float* c, std::uint16_t* c_bf16, int ldc) {
  product_on_tiles(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, c_bf16, ldc);
}

}  // namespace shardft::amx
