// bf16 x bf16 -> fp32 GEMM on AMX tiles (kernels/amx_gemm_bf16.hpp). Compiled with -mamx-tile -mamx-bf16
// where the compiler has them (CMakeLists.txt); every AMX instruction runs only after available().
//
// One TDPBF16PS multiplies a 16 x 32 bf16 tile of A by a 32 x 16 tile of B into a 16 x 16 fp32 tile of C:
//   C[i][j] += sum_{p<16} A[i][2p] B[2p][j] + A[i][2p+1] B[2p+1][j]
// B's tile is stored pair-interleaved ("VNNI"): row p holds (B[2p][j], B[2p+1][j]) for j = 0..15.
// The micro-kernel keeps a 32 x 32 block of C in four tiles; two A tiles and two B tiles feed the four
// products of each 32-wide step of K, so every tile loaded is used twice.
//
// Packing: op(B) a block of column pairs at a time (as much as fits half the L2) into [column pair][K
// chunk][2 VNNI tiles], op(A) a row pair at a time into [K chunk][2 tiles of 16 x 32], both zero-padded to
// multiples of 32 in M, N and K, so the micro-kernel has no edge cases and walks each operand contiguously.
// The transposed operands go through 16 x 16 transposes of 32-bit words in registers. Each row pair's
// strip is packed right before the block's columns use it (all of A once up front where B takes several
// blocks), so it is in L1 when the tiles read it; B's tiles are loaded with the streaming hint, since
// each is read once per row pair.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "kernels/amx_gemm_bf16.hpp"
#include "kernels/blas_core.hpp"
#include "kernels/cpu/amx_tiles.hpp"

namespace shardft::amx {

namespace {

using namespace tiles;

constexpr std::size_t kBBlockBytes = std::size_t{1} << 20;
// K is taken in passes of at most 16 steps of 32 (a 32 KB A strip, which stays in L1 while B's tiles stream
// past it); a block's sums between passes wait in fp32 (exact: the next pass continues from those bits).
constexpr int kChunksPerPass = 16;

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
      if (c_bf16 && beta == 0.f) {
        _mm256_mask_storeu_epi16(c_bf16 + at, mask, round_to_bf16(v));
      } else if (c_bf16) {  // beta C + v in fp32 (as an fp32 C's fmadd below), rounded once
        const __m512 old = widen_bf16(_mm256_maskz_loadu_epi16(mask, c_bf16 + at));
        _mm256_mask_storeu_epi16(c_bf16 + at, mask, round_to_bf16(_mm512_fmadd_ps(vb, old, v)));
      } else if (beta == 0.f) {
        _mm512_mask_storeu_ps(c + at, mask, v);
      } else {
        _mm512_mask_storeu_ps(c + at, mask, _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask, c + at), v));
      }
    }
  }
}

// acc[32 x 32] (+)= A's row pair strip times B's column pair strip over `chunks` steps of 32: acc's sum so far
// is loaded into the tiles first where `accumulate` (a later block of K), and the tiles stored back. Where
// `c_rows` is set (the last block of K), the lines of C the block will be written to are fetched for writing
// meanwhile (rows `stride` apart, `row_bytes` long): C is usually bigger than the L2, and 32 row stores
// that each miss would otherwise stall the tiles.
SHARDFT_AMX_TARGET void micro_kernel(const std::uint16_t* a, const std::uint16_t* b, int chunks, bool accumulate,
                                     float* acc, const char* c_rows, std::size_t stride, int rows, int row_bytes) {
  if (accumulate) {
    _tile_loadd(0, acc, 128);
    _tile_loadd(1, acc + 16, 128);
    _tile_loadd(2, acc + 16 * 32, 128);
    _tile_loadd(3, acc + 16 * 32 + 16, 128);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  if (!c_rows) rows = 0;
  const int per_step = (rows + chunks - 1) / chunks;
  int next_row = 0;
  for (int q = 0; q < chunks; ++q) {
    const std::uint16_t* aq = a + static_cast<std::size_t>(q) * 2 * kTileElements;
    const std::uint16_t* bq = b + static_cast<std::size_t>(q) * 2 * kTileElements;
    _tile_loadd(4, aq, 64);
    _tile_stream_loadd(6, bq, 64);  // B: used once per A strip, so kept out of the way of A's lines
    _tile_dpbf16ps(0, 4, 6);
    _tile_stream_loadd(7, bq + kTileElements, 64);
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(5, aq + kTileElements, 64);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
    for (int e = 0; e < per_step && next_row < rows; ++e, ++next_row) {
      const char* line = c_rows + next_row * stride;
      for (int off = 0; off < row_bytes; off += 64) __builtin_prefetch(line + off, 1, 3);
    }
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
  const int chunks = (std::max(k, 1) + 31) / 32, row_pairs = (m + 31) / 32, col_pairs = (n + 31) / 32;
  const std::size_t strip = static_cast<std::size_t>(chunks) * 2 * kTileElements;  // one pair's tiles
  const int pairs_fitting = static_cast<int>(kBBlockBytes / (strip * sizeof(std::uint16_t)));
  const int pairs_per_block = std::min(col_pairs, std::max(1, pairs_fitting));
  // Tiles start on cache lines: a tile row that straddles two lines costs two loads.
  thread_local std::vector<std::uint16_t> a_buffer, b_buffer;
  thread_local std::vector<float> acc_buffer;
  // With one block of B, each pass's A strip is packed right before its products (it stays in L1); with
  // several, all of A is packed once, not once per block.
  const bool pack_a_once = col_pairs > pairs_per_block;
  const std::size_t pass_strip = static_cast<std::size_t>(kChunksPerPass) * 2 * kTileElements;
  std::uint16_t* const a_packed = cache_aligned(a_buffer, pack_a_once ? strip * row_pairs : pass_strip);
  for (int ip = 0; pack_a_once && ip < row_pairs; ++ip) {
    pack_a_strip(trans_a, a, lda, m, k, ip * 32, 0, chunks, a_packed + ip * strip);
  }
  std::uint16_t* const b_block = cache_aligned(b_buffer, strip * pairs_per_block);
  acc_buffer.resize(static_cast<std::size_t>(pairs_per_block) * 32 * 32 + 16);
  float* const acc =
      reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(acc_buffer.data()) + 63) & ~std::uintptr_t{63});
  const std::size_t c_bytes = c_bf16 ? 2 : 4;
  configure_tiles();
  for (int jb = 0; jb < col_pairs; jb += pairs_per_block) {
    const int jb_end = std::min(col_pairs, jb + pairs_per_block);
    pack_b_pairs(trans_b, b, ldb, n, k, jb, jb_end, chunks, b_block);
    for (int ip = 0; ip < row_pairs; ++ip) {
      for (int c0 = 0; c0 < chunks; c0 += kChunksPerPass) {
        const int pass = std::min(kChunksPerPass, chunks - c0);
        const bool last = c0 + pass == chunks;
        const std::uint16_t* a_strip = a_packed + ip * strip + static_cast<std::size_t>(c0) * 2 * kTileElements;
        if (!pack_a_once) {
          pack_a_strip(trans_a, a, lda, m, k, ip * 32, c0, pass, a_packed);
          a_strip = a_packed;
        }
        for (int jp = jb; jp < jb_end; ++jp) {
          const std::size_t at = static_cast<std::size_t>(ip) * 32 * ldc + static_cast<std::size_t>(jp) * 32;
          const char* c_rows = !last  ? nullptr
                               : c_bf16 ? reinterpret_cast<const char*>(c_bf16 + at)
                                        : reinterpret_cast<const char*>(c + at);
          float* block_acc = acc + static_cast<std::size_t>(jp - jb) * 32 * 32;
          const std::uint16_t* b_strip = b_block + (jp - jb) * strip + static_cast<std::size_t>(c0) * 2 * kTileElements;
          micro_kernel(a_strip, b_strip, pass, c0 > 0, block_acc, c_rows, ldc * c_bytes, std::min(32, m - ip * 32),
                       static_cast<int>(std::min(32, n - jp * 32) * c_bytes));
          if (last) write_block(block_acc, ip * 32, jp * 32, m, n, alpha, beta, c, c_bf16, ldc);
        }
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
