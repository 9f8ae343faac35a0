#pragma once
// bf16 x bf16 products on the CPU's AMX tiles (Intel Sapphire Rapids and later): the CPU's way of running
// the GEMMs a bf16 step runs on a GPU's tensor cores, with the same rounding points (exact bf16 products,
// fp32 accumulation; C rounded once where it is bf16). Where the CPU, the OS or the compiler has no AMX,
// available() is false and kernels/gemm.cpp widens tiles into sgemm instead.
//   C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C        (row-major; op(X) = X or X^T)
#include <cstdint>
#include <string>

namespace shardft::amx {

// Whether bf16 products run on AMX in this process: the CPU has AMX-BF16, the kernel granted the tile
// state (asked once, process-wide) and the build has the kernel; false after set_enabled(false).
bool available();
// "AMX bf16 tiles" or why not ("the CPU has no AMX", "the OS refused the tile state", ...).
std::string describe();
// Turns the AMX path off (or back on, where available): tests compare it with the widened path.
void set_enabled(bool on);

// C = alpha op(A) op(B) + beta C with bf16 operands (their bits) and fp32 C, or, where c_bf16 is set, that
// sum (C read as bf16 where beta is not 0) in fp32, written to c_bf16 rounded to nearest even (c unused). lda / ldb / ldc are row strides in elements.
// Host memory, the calling thread; requires available().
void gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const std::uint16_t* a, int lda,
               const std::uint16_t* b, int ldb, float beta, float* c, std::uint16_t* c_bf16, int ldc);

}  // namespace shardft::amx
