#pragma once
// Which kernel the CPU BLAS runs on this CPU, and which it should run. OpenBLAS built for many CPUs
// (Debian's DYNAMIC_ARCH package) picks its kernels from CPUID when it loads; a CPU newer than the library
// (or one a VM reports oddly) gets a generic fallback, Prescott's SSE3 kernel, several times slower at
// sgemm than the AVX-512 one the CPU could run. OpenBLAS reads OPENBLAS_CORETYPE only when it loads, so the
// choice takes effect in a new process image: the CLI re-executes itself once, before MPI starts, with the
// variable set (src/cli/main.cpp). A user's own OPENBLAS_CORETYPE always wins; SHARDFT_BLAS_CORE=off
// keeps the library's choice, SHARDFT_BLAS_CORE=<core> asks for that core.
#include <string>

namespace shardft {

struct CpuFeatures {
  bool intel = false, amd = false;
  bool avx = false, avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512_bf16 = false;
  bool amx = false;       // AMX tiles (Sapphire Rapids)
  bool amx_bf16 = false;  // and their bf16 products (TDPBF16PS)
};

// This CPU's, from CPUID (all false off x86-64).
CpuFeatures host_cpu_features();
// "AVX2, FMA, AVX-512 (F, BW, VL, DQ), AVX-512 BF16, AMX"; "no AVX" where none.
std::string describe_cpu_features(const CpuFeatures& f);

// The core OpenBLAS runs (openblas_get_corename(): "SkylakeX", "Haswell", "Prescott", ...); empty where
// the BLAS is not OpenBLAS.
std::string blas_core_name();

// The rule: the OpenBLAS core whose fp32 GEMM kernels this CPU runs best (the model's CPU GEMMs are sgemm:
// bf16 is widened into them), "SkylakeX" with AVX-512 F/BW/VL/DQ, "Haswell" (Intel) or "Zen" (AMD) with
// AVX2 and FMA, "Sandybridge" with AVX, when `library_core` is a core of a lower instruction-set level;
// empty where the library's choice is as good, or is a core this rule does not know (left alone).
std::string better_blas_core(const std::string& library_core, const CpuFeatures& f);

// What the CLI should do before MPI starts: the core to re-execute with (OPENBLAS_CORETYPE), or empty.
// Empty where OPENBLAS_CORETYPE is set (the user's, or this process is the re-executed one),
// SHARDFT_BLAS_CORE is off, or the library's choice is as good; SHARDFT_BLAS_CORE=<core> asks for <core>.
std::string blas_core_to_force();
// Marks the process image about to be re-executed with `core` (the library's choice is kept for the report).
void note_blas_core_forced(const std::string& core);

// "OpenBLAS core SkylakeX, the library's own choice for this CPU (AVX2, ...)", or chosen by shardft over
// Prescott, or from the user's OPENBLAS_CORETYPE, or "the BLAS is not OpenBLAS ...".
std::string describe_blas_core();

}  // namespace shardft
