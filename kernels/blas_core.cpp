#include "kernels/blas_core.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

extern "C" char* openblas_get_corename(void) __attribute__((weak));

namespace shardft {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The instruction-set level of OpenBLAS's x86-64 cores, as their sgemm kernels use it: 0 SSE, 1 AVX,
// 2 AVX2 + FMA, 3 AVX-512; -1 for a name this rule does not know.
int core_level(const std::string& core) {
  static const std::vector<std::pair<std::vector<std::string>, int>> levels = {
      {{"prescott", "katmai", "coppermine", "northwood", "banias", "core2", "penryn", "dunnington", "nehalem", "atom",
        "athlon", "opteron", "opteron_sse3", "barcelona", "bobcat", "nano"},
       0},
      {{"sandybridge", "bulldozer", "piledriver", "steamroller", "excavator"}, 1},
      {{"haswell", "zen"}, 2},
      {{"skylakex", "cooperlake", "sapphirerapids"}, 3},
  };
  const std::string c = lower(core);
  for (const auto& [names, level] : levels) {
    if (std::find(names.begin(), names.end(), c) != names.end()) return level;
  }
  return -1;
}

}  // namespace

CpuFeatures host_cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    f.intel = b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e;  // "GenuineIntel"
    f.amd = b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;    // "AuthenticAMD"
  }
  // __builtin_cpu_supports also asks whether the OS saves the registers (XGETBV).
  __builtin_cpu_init();
  f.avx = __builtin_cpu_supports("avx");
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  if (f.avx512f && __get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = (a >> 5) & 1;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.amx = f.avx512f && ((d >> 24) & 1);
    f.amx_bf16 = f.amx && ((d >> 22) & 1);
  }
#endif
  return f;
}

std::string describe_cpu_features(const CpuFeatures& f) {
  std::vector<std::string> parts;
  if (f.avx && !f.avx2) parts.push_back("AVX");
  if (f.avx2) parts.push_back("AVX2");
  if (f.fma) parts.push_back("FMA");
  if (f.avx512f) {
    std::string s = "AVX-512 (F";
    if (f.avx512bw) s += ", BW";
    if (f.avx512vl) s += ", VL";
    if (f.avx512dq) s += ", DQ";
    parts.push_back(s + ")");
  }
  if (f.avx512_bf16) parts.push_back("AVX-512 BF16");
  if (f.amx) parts.push_back("AMX");
  if (parts.empty()) return "no AVX";
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string blas_core_name() {
  if (!openblas_get_corename) return "";
  const char* name = openblas_get_corename();
  return name ? name : "";
}

std::string better_blas_core(const std::string& library_core, const CpuFeatures& f) {
  int want = -1;
  std::string core;
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq) {
    want = 3, core = "SkylakeX";
  } else if (f.avx2 && f.fma) {
    want = 2, core = f.amd ? "Zen" : "Haswell";
  } else if (f.avx) {
    want = 1, core = "Sandybridge";
  }
  const int have = core_level(library_core);
  return have >= 0 && have < want ? core : "";
}

std::string blas_core_to_force() {
  if (!env("OPENBLAS_CORETYPE").empty()) return "";  // the user's, or this image is the re-executed one
  const std::string library = blas_core_name();
  if (library.empty()) return "";  // not OpenBLAS
  const std::string asked = env("SHARDFT_BLAS_CORE");
  if (lower(asked) == "off") return "";
  if (!asked.empty() && lower(asked) != "auto") return lower(asked) == lower(library) ? "" : asked;
  return better_blas_core(library, host_cpu_features());
}

void note_blas_core_forced(const std::string& core) {
  setenv("SHARDFT_BLAS_CORE_FROM", blas_core_name().c_str(), 1);
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
}

std::string describe_blas_core() {
  const std::string core = blas_core_name();
  if (core.empty()) return "the BLAS is not OpenBLAS (which kernel it runs on this CPU is not known)";
  const std::string features = describe_cpu_features(host_cpu_features());
  const std::string asked = env("OPENBLAS_CORETYPE"), from = env("SHARDFT_BLAS_CORE_FROM");
  std::string s = "OpenBLAS core " + core;
  if (!from.empty()) {
    const std::string by = env("SHARDFT_BLAS_CORE");
    s += (by.empty() || lower(by) == "auto" ? ", chosen by shardft" : ", as SHARDFT_BLAS_CORE=" + by + " asks,") +
         " over " + from + " (the library's own choice) for this CPU (" + features + ")";
    if (lower(asked) != lower(core)) s += "; asked for " + asked + ", which this OpenBLAS does not have";
    return s;
  }
  if (!asked.empty()) return s + " (OPENBLAS_CORETYPE=" + asked + " from the environment)";
  s += ", the library's own choice for this CPU (" + features + ")";
  const std::string better = better_blas_core(core, host_cpu_features());
  if (!better.empty()) s += "; " + better + " would run faster (SHARDFT_BLAS_CORE=off keeps this one)";
  return s;
}

}  // namespace shardft
