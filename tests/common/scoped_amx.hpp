#pragma once
// Turns the AMX bf16 path off for a scope (or leaves it as it is), and back on however the test ends:
// tests compare the AMX products with the widened ones.
#include "kernels/amx_gemm_bf16.hpp"

namespace shardft::testing_util {

struct ScopedAmx {
  explicit ScopedAmx(bool on) { amx::set_enabled(on); }
  ~ScopedAmx() { amx::set_enabled(true); }
  ScopedAmx(const ScopedAmx&) = delete;
  ScopedAmx& operator=(const ScopedAmx&) = delete;
};

}  // namespace shardft::testing_util
