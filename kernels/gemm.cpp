#include "kernels/gemm.hpp"

#include <cblas.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>

#include "kernels/amx_gemm_bf16.hpp"
#include "kernels/device_backend.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/gemm_counters.hpp"
#include "kernels/gpu_toolkit.hpp"
#include "kernels/kernel_scratch.hpp"
#include "kernels/kernel_timer.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

namespace shardft {

namespace {

// The dispatch: views on a device go to its GEMM library (kernels/device_backend.hpp: cuBLAS where Kokkos
// runs on CUDA), host views to BLAS. With a Serial or OpenMP Kokkos, as in the CPU builds, every view is
// a host view and BLAS does the work even when cuBLAS is linked.
constexpr bool kGemmOnDevice = kComputeOnDevice;

std::string shape(std::size_t r, std::size_t c) { return "[" + std::to_string(r) + "," + std::to_string(c) + "]"; }

// Every fp32 product: the device's library for device views (on the compute queue, so GEMMs and Kokkos
// kernels stay in issue order without a fence), BLAS for host views.
void sgemm_raw(Op op_a, Op op_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
               float beta, float* c, int ldc) {
  const VendorKernel launch("gemm fp32");
  if constexpr (kGemmOnDevice) {
    device_backend::sgemm(op_a == Op::T, op_b == Op::T, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, op_a == Op::N ? CblasNoTrans : CblasTrans, op_b == Op::N ? CblasNoTrans : CblasTrans, m,
              n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// ---- bf16 operands -----------------------------------------------------------------------------------

// How much of a bf16 operand is widened to fp32 at a time. On the CPU, 512K elements (2 MiB per
// operand) bound the scratch and keep BLAS's panels warm; smaller tiles widen the other operand more
// often (a quarter of the tile made a bf16 step a fifth slower). On a GPU each tile costs a widening launch
// and a cuBLAS call, and 1M-element tiles turned one step of a 1B model into ~10,000 of each; 2^28 widens
// any weight of a Llama-3 8B-sized model (the 128256 x 4096 LM head included) in one go, for 1 GiB of
// scratch at most.
std::int64_t g_tile_elements = kGemmOnDevice ? std::int64_t{1} << 28 : std::int64_t{1} << 19;


// dst [R, C] row-major = src[r0 : r0 + R, c0 : c0 + C] of a row-major bf16 matrix with row stride ld. Host
// memory only (a build whose GEMMs run on cuBLAS never widens): one row per iteration, whose contiguous
// inner loop the compiler vectorizes (a 16-bit shift per element).
void widen_block(const bf16* src, std::int64_t ld, std::int64_t r0, std::int64_t c0, std::int64_t R, std::int64_t C,
                 float* dst) {
  Kokkos::parallel_for(
      "gemm_widen_bf16", Range(0, R), KOKKOS_LAMBDA(const std::int64_t i) {
        const bf16* in = src + (r0 + i) * ld + c0;
        float* out = dst + i * C;
        for (std::int64_t j = 0; j < C; ++j) out[j] = bf16::to_float(in[j].bits);
      });
}

// Rows [m0, m0 + rows) of op(A) over all of K as BLAS takes them: A's own memory when it is fp32, else
// the widened block (op N: A's rows; op T: A's columns, for every row of A).
struct Panel {
  const float* p;
  int ld;
};
Panel a_panel(Op op, const GemmOperand& a, std::int64_t m0, std::int64_t rows, std::int64_t k) {
  const std::int64_t ld = a.ld();
  if (!a.is_bf16) return {a.f32_data() + (op == Op::N ? m0 * ld : m0), static_cast<int>(ld)};
  float* dst = kernel_scratch<float>("gemm_bf16_widened_a", rows * k).data();
  if (op == Op::N) {
    widen_block(a.b16_data(), ld, m0, 0, rows, k, dst);
    return {dst, static_cast<int>(k)};
  }
  widen_block(a.b16_data(), ld, 0, m0, k, rows, dst);
  return {dst, static_cast<int>(rows)};
}
// Columns [n0, n0 + cols) of op(B) over all of K, the same way (op N: B's columns; op T: B's rows).
Panel b_panel(Op op, const GemmOperand& b, std::int64_t n0, std::int64_t cols, std::int64_t k) {
  const std::int64_t ld = b.ld();
  if (!b.is_bf16) return {b.f32_data() + (op == Op::N ? n0 : n0 * ld), static_cast<int>(ld)};
  float* dst = kernel_scratch<float>("gemm_bf16_widened_b", cols * k).data();
  if (op == Op::N) {
    widen_block(b.b16_data(), ld, 0, n0, k, cols, dst);
    return {dst, static_cast<int>(cols)};
  }
  widen_block(b.b16_data(), ld, n0, 0, cols, k, dst);
  return {dst, static_cast<int>(k)};
}
struct MixedShape {
  std::int64_t m, n, k;
};

MixedShape mixed_shape(Op op_a, Op op_b, const GemmOperand& a, const GemmOperand& b, std::size_t c_rows,
                       std::size_t c_cols) {
  const std::int64_t m = op_a == Op::N ? a.extent(0) : a.extent(1);
  const std::int64_t k = op_a == Op::N ? a.extent(1) : a.extent(0);
  const std::int64_t kb = op_b == Op::N ? b.extent(0) : b.extent(1);
  const std::int64_t n = op_b == Op::N ? b.extent(1) : b.extent(0);
  if (k != kb || static_cast<std::int64_t>(c_rows) != m || static_cast<std::int64_t>(c_cols) != n) {
    throw std::invalid_argument("gemm: shapes do not match: op(A) " + shape(m, k) + ", op(B) " + shape(kb, n) +
                                ", C " + shape(c_rows, c_cols));
  }
  return {m, n, k};
}

// Both operands fp32: one sgemm over the operands' own memory, C row-major with row stride ldc.
void fp32_product(Op op_a, Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b, float beta, float* c,
                  std::int64_t ldc, const MixedShape& s) {
  count_gemm(false, false, s.m, s.n, s.k);
  sgemm_raw(op_a, op_b, static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), alpha, a.f32_data(),
            static_cast<int>(a.ld()), b.f32_data(), static_cast<int>(b.ld()), beta, c, static_cast<int>(ldc));
}

// A C that BLAS and cuBLAS can write with a row stride: each row's elements back to back (columns_of).
template <class T>
void check_output_columns(const Strided2<T>& c, const char* what) {
  if (c.extent(1) > 1 && c.stride_1() != 1) {
    throw std::invalid_argument(std::string(what) + ": C's columns must be contiguous within a row");
  }
}

}  // namespace

void gemm(Op op_a, Op op_b, float alpha, Unmanaged2<const float> a, Unmanaged2<const float> b, float beta,
          Unmanaged2<float> c) {
  const MixedShape s = mixed_shape(op_a, op_b, a, b, c.extent(0), c.extent(1));
  if (s.m == 0 || s.n == 0) return;
  fp32_product(op_a, op_b, alpha, a, b, beta, c.data(), static_cast<std::int64_t>(c.extent(1)), s);
}

void gemm_ld(Op op_a, Op op_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
             float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  cblas_sgemm(CblasRowMajor, op_a == Op::N ? CblasNoTrans : CblasTrans, op_b == Op::N ? CblasNoTrans : CblasTrans, m,
              n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

namespace {

// Rows [m_begin, m_end) of C = alpha op(A) op(B) + beta C, C row-major with row stride ldc and `c` at row
// m_begin, each bf16 operand widened a tile at a time into sgemm (gemm.hpp gemm_mixed); a fp32 operand is
// read in place.
void tiled_product_rows(Op op_a, Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b, float beta,
                        float* c, std::int64_t ldc, const MixedShape& s, std::int64_t m_begin, std::int64_t m_end) {
  const std::int64_t n = s.n, k = s.k, m = m_end - m_begin;
  // A fp32 operand is never tiled; a bf16 one in whole rows (columns) of K, as many as fit a tile.
  const std::int64_t per_tile = std::max<std::int64_t>(1, g_tile_elements / std::max<std::int64_t>(k, 1));
  const std::int64_t mt = a.is_bf16 ? std::min(m, per_tile) : m;
  const std::int64_t nt = b.is_bf16 ? std::min(n, per_tile) : n;
  // Each operand is widened once per tile of the other; the outer loop runs over the operand whose
  // repeated widening would cost more.
  const std::int64_t m_tiles = (m + mt - 1) / mt, n_tiles = (n + nt - 1) / nt;
  const std::int64_t a_cost = a.is_bf16 ? m * k : 0, b_cost = b.is_bf16 ? n * k : 0;
  const bool outer_m = b_cost * m_tiles <= a_cost * n_tiles;
  auto product = [&](std::int64_t m0, std::int64_t rows, const Panel& pa, std::int64_t n0, std::int64_t cols,
                     const Panel& pb) {
    // A widened panel keeps its operand's orientation, so op_a and op_b stand.
    sgemm_raw(op_a, op_b, static_cast<int>(rows), static_cast<int>(cols), static_cast<int>(k), alpha, pa.p, pa.ld,
              pb.p, pb.ld, beta, c + (m0 - m_begin) * ldc + n0, static_cast<int>(ldc));
  };
  if (outer_m) {
    for (std::int64_t m0 = m_begin; m0 < m_end; m0 += mt) {
      const std::int64_t rows = std::min(mt, m_end - m0);
      const Panel pa = a_panel(op_a, a, m0, rows, k);
      for (std::int64_t n0 = 0; n0 < n; n0 += nt) {
        const std::int64_t cols = std::min(nt, n - n0);
        product(m0, rows, pa, n0, cols, b_panel(op_b, b, n0, cols, k));
      }
    }
  } else {
    for (std::int64_t n0 = 0; n0 < n; n0 += nt) {
      const std::int64_t cols = std::min(nt, n - n0);
      const Panel pb = b_panel(op_b, b, n0, cols, k);
      for (std::int64_t m0 = m_begin; m0 < m_end; m0 += mt) {
        const std::int64_t rows = std::min(mt, m_end - m0);
        product(m0, rows, a_panel(op_a, a, m0, rows, k), n0, cols, pb);
      }
    }
  }
}

// C (fp32, row-major, row stride ldc) = alpha op(A) op(B) + beta C with at least one bf16 operand, as
// tiles. Host memory: one launch as the GPU path counts it (one cuBLAS GEMM when both operands are bf16);
// the tiles' widening and sgemms are the CPU's way of running it and are not counted.
void widened_tiles_product(Op op_a, Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b, float beta,
                           float* c, std::int64_t ldc, const MixedShape& s) {
  const VendorKernel launch(a.is_bf16 && b.is_bf16 ? "gemm bf16 x bf16 (host: widened tiles)" : "gemm mixed bf16/fp32");
  std::optional<UncountedLaunches> uncounted;
  if (!kGemmOnDevice) uncounted.emplace();
  tiled_product_rows(op_a, op_b, alpha, a, b, beta, c, ldc, s, 0, s.m);
}

// C = alpha op(A) op(B) + beta C in bf16 without cuBLAS: blocks of C's rows in fp32 scratch of at most a
// tile (at least one row; C's values widened there first where beta is not 0), each rounded once into C
// (row stride ldc): the values cuBLAS's bf16 output has, without an fp32 copy of all of C. One launch, as
// the GPU path counts it.
void widened_tiles_product_bf16(Op op_a, Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b, float beta,
                                bf16* c, std::int64_t ldc, const MixedShape& s) {
  const VendorKernel launch("gemm -> bf16 (host: widened tiles)");
  std::optional<UncountedLaunches> uncounted;
  if (!kGemmOnDevice) uncounted.emplace();
  const std::int64_t block = std::max<std::int64_t>(1, g_tile_elements / s.n);
  const auto c32 = kernel_scratch<float>("gemm_bf16_out_f32", std::min(block, s.m) * s.n);
  for (std::int64_t m0 = 0; m0 < s.m; m0 += block) {
    const std::int64_t rows = std::min(block, s.m - m0);
    const Unmanaged2<float> block_f32(c32.data(), rows, s.n);
    const Kokkos::LayoutStride layout(static_cast<std::size_t>(rows), static_cast<std::size_t>(ldc),
                                      static_cast<std::size_t>(s.n), 1);
    const Strided2<bf16> c_rows(c + m0 * ldc, layout);
    const bool back_to_back = ldc == s.n;  // C's rows contiguous: the flat conversions
    if (beta != 0.f && back_to_back) to_f32(Unmanaged1<const bf16>(c + m0 * ldc, rows * s.n), flat(block_f32));
    if (beta != 0.f && !back_to_back) to_f32(Strided2<const bf16>(c_rows), block_f32);
    tiled_product_rows(op_a, op_b, alpha, a, b, beta, c32.data(), s.n, s, m0, m0 + rows);
    if (back_to_back) {
      to_bf16(flat(Unmanaged2<const float>(block_f32)), Unmanaged1<bf16>(c + m0 * ldc, rows * s.n));
    } else {
      to_bf16(Unmanaged2<const float>(block_f32), c_rows);
    }
  }
}

const std::uint16_t* bits(const bf16* p) { return reinterpret_cast<const std::uint16_t*>(p); }

// Both operands bf16, on cuBLAS's tensor cores: C fp32 or bf16 (beta as given; bf16: rounded once).
// The timer's name for a GEMM: with its transposes and m x n x k while kernels are timed, so the report
// gives each shape's time (and from it the shape's FLOP rate) instead of one line for all GEMMs.
std::string timed_gemm_name(const char* kind, Op op_a, Op op_b, const MixedShape& s) {
  return std::string(kind) + " " + (op_a == Op::T ? "T" : "N") + (op_b == Op::T ? "T" : "N") + " " +
         std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
}

void device_bf16_product(Op op_a, Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b, float beta,
                         float* c_f32, bf16* c_bf16, int ldc, const MixedShape& s) {
  const char* kind = c_bf16 ? "gemm bf16 x bf16 -> bf16 (tensor cores)" : "gemm bf16 x bf16 (tensor cores)";
  const VendorKernel launch(kernel_timer_installed() ? timed_gemm_name(kind, op_a, op_b, s).c_str() : kind);
  const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  const int lda = static_cast<int>(a.ld()), ldb = static_cast<int>(b.ld());
  if (c_bf16) {
    device_backend::gemm_bf16_bf16(op_a == Op::T, op_b == Op::T, m, n, k, alpha, bits(a.b16_data()), lda,
                                   bits(b.b16_data()), ldb, beta, reinterpret_cast<std::uint16_t*>(c_bf16), ldc);
  } else {
    device_backend::gemm_bf16_f32(op_a == Op::T, op_b == Op::T, m, n, k, alpha, bits(a.b16_data()), lda,
                                  bits(b.b16_data()), ldb, beta, c_f32, ldc);
  }
}

// Both operands bf16 on a CPU with AMX: the product on its tiles, the same rounding points as the tensor
// cores' (kernels/amx_gemm_bf16.hpp). One launch, as the GPU path counts it.
void amx_bf16_product(Op op_a, Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b, float beta,
                      float* c_f32, bf16* c_bf16, int ldc, const MixedShape& s) {
  const char* kind = c_bf16 ? "gemm bf16 x bf16 -> bf16 (host: AMX tiles)" : "gemm bf16 x bf16 (host: AMX tiles)";
  const VendorKernel launch(kernel_timer_installed() ? timed_gemm_name(kind, op_a, op_b, s).c_str() : kind);
  amx::gemm_bf16(op_a == Op::T, op_b == Op::T, static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k),
                 alpha, bits(a.b16_data()), static_cast<int>(a.ld()), bits(b.b16_data()), static_cast<int>(b.ld()),
                 beta, c_f32, reinterpret_cast<std::uint16_t*>(c_bf16), ldc);
}

// Both operands bf16: the product as one tensor-core GEMM on a device, or on AMX tiles on a CPU that has
// them (into c_f32 with beta, or into c_bf16), and true; false elsewhere, where the caller widens tiles.
bool on_tensor_cores(Op op_a, Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b, float beta,
                     float* c_f32, bf16* c_bf16, int ldc, const MixedShape& s) {
  if (!a.is_bf16 || !b.is_bf16) return false;
  if (kGemmOnDevice) {
    device_bf16_product(op_a, op_b, alpha, a, b, beta, c_f32, c_bf16, ldc, s);
  } else if (amx::available()) {
    amx_bf16_product(op_a, op_b, alpha, a, b, beta, c_f32, c_bf16, ldc, s);
  } else {
    return false;
  }
  return true;
}

}  // namespace

namespace {
// C [c_rows, c_cols] at c with row stride ldc, in fp32 (c_f32) or bf16 (c_bf16).
void mixed_product(Op op_a, Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b, float beta, float* c_f32,
                   bf16* c_bf16, std::size_t c_rows, std::size_t c_cols, std::int64_t ldc) {
  const MixedShape s = mixed_shape(op_a, op_b, a, b, c_rows, c_cols);
  if (s.m == 0 || s.n == 0) return;
  if (c_f32 != nullptr && !a.is_bf16 && !b.is_bf16) return fp32_product(op_a, op_b, alpha, a, b, beta, c_f32, ldc, s);
  count_gemm(a.is_bf16, b.is_bf16, s.m, s.n, s.k);
  if (on_tensor_cores(op_a, op_b, alpha, a, b, beta, c_f32, c_bf16, static_cast<int>(ldc), s)) return;
  if (c_f32 != nullptr) return widened_tiles_product(op_a, op_b, alpha, a, b, beta, c_f32, ldc, s);
  widened_tiles_product_bf16(op_a, op_b, alpha, a, b, beta, c_bf16, ldc, s);
}
}  // namespace

void gemm_mixed(Op op_a, Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b, float beta,
                Unmanaged2<float> c) {
  mixed_product(op_a, op_b, alpha, a, b, beta, c.data(), nullptr, c.extent(0), c.extent(1),
                static_cast<std::int64_t>(c.extent(1)));
}

void gemm_mixed_to_columns(Op op_a, Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b, float beta,
                           Strided2<float> c) {
  check_output_columns(c, "gemm_mixed_to_columns");
  mixed_product(op_a, op_b, alpha, a, b, beta, c.data(), nullptr, c.extent(0), c.extent(1),
                static_cast<std::int64_t>(c.stride_0()));
}

void gemm_mixed_bf16_out(Op op_a, Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b,
                         Unmanaged2<bf16> c, float beta) {
  mixed_product(op_a, op_b, alpha, a, b, beta, nullptr, c.data(), c.extent(0), c.extent(1),
                static_cast<std::int64_t>(c.extent(1)));
}

void gemm_mixed_bf16_out_to_columns(Op op_a, Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b,
                                    Strided2<bf16> c, float beta) {
  check_output_columns(c, "gemm_mixed_bf16_out_to_columns");
  mixed_product(op_a, op_b, alpha, a, b, beta, nullptr, c.data(), c.extent(0), c.extent(1),
                static_cast<std::int64_t>(c.stride_0()));
}

GemmOperand GemmOperand::columns(const GemmOperand& whole, std::int64_t col0, std::int64_t cols) {
  if (!whole.whole()) throw std::invalid_argument("GemmOperand::columns: the operand is already a column block");
  if (col0 < 0 || cols < 0 || col0 + cols > whole.ld()) {
    throw std::invalid_argument("GemmOperand::columns: columns [" + std::to_string(col0) + ", " +
                                std::to_string(col0 + cols) + ") leave a matrix of " + std::to_string(whole.ld()));
  }
  GemmOperand block = whole;
  block.col0_ = col0;
  block.cols_ = cols;
  return block;
}

void gemm_set_bf16_tile_elements(std::int64_t n) { g_tile_elements = std::max<std::int64_t>(1, n); }
std::int64_t gemm_bf16_tile_elements() { return g_tile_elements; }
bool gemm_widens_bf16() { return !kGemmOnDevice && !amx::available(); }

void gemm_set_num_threads(int n) { openblas_set_num_threads(n); }

std::string gemm_backend_description(bool with_idle) {
  if (kGemmOnDevice) return device_backend::gemm_library();
  const std::string idle = gpu_toolkit::gemm_library();
  const std::string bf16 = amx::available() ? "; bf16 x bf16 on AMX tiles" : "";
  if (!with_idle || idle.empty()) return "BLAS (OpenBLAS)" + bf16;
  return "BLAS (OpenBLAS)" + bf16 + "; " + idle + " linked but idle, this Kokkos has no CUDA backend";
}

void linear_forward(Unmanaged2<const float> x, Unmanaged1<const float> w, Unmanaged2<float> y, float beta) {
  const std::size_t out = y.extent(1), in = x.extent(1);
  if (w.extent(0) != out * in) throw std::invalid_argument("linear_forward: weight size does not match [out,in]");
  gemm(Op::N, Op::T, 1.f, x, Unmanaged2<const float>(w.data(), out, in), beta, y);
}

void linear_backward(Unmanaged2<const float> x, Unmanaged1<const float> w, Unmanaged2<const float> dy,
                     Unmanaged2<float> dx, float dx_beta, Unmanaged1<float> dw) {
  const std::size_t out = dy.extent(1), in = x.extent(1);
  if (w.extent(0) != out * in || dw.extent(0) != out * in) {
    throw std::invalid_argument("linear_backward: weight or gradient size does not match [out,in]");
  }
  gemm(Op::N, Op::N, 1.f, dy, Unmanaged2<const float>(w.data(), out, in), dx_beta, dx);
  gemm(Op::T, Op::N, 1.f, dy, x, 1.f, Unmanaged2<float>(dw.data(), out, in));
}

}  // namespace shardft
