#pragma once
// W consecutive bf16 (or fp32: F32Pack) values moved as one access: a GPU thread that loads and stores
// 16 bytes at a time (W = 8) needs an eighth of the memory instructions of 2-byte accesses and keeps
// more bytes in flight (llm.c's Packed128). Elementwise bf16 kernels take W = 8 where every row they touch starts 16-byte
// aligned (bf16_pack_fits) and W = 1 elsewhere; each element's arithmetic is the same either way.
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "kernels/bf16.hpp"

namespace shardft {

template <int W>
struct alignas(2 * W) Bf16Pack {
  std::uint16_t bits[W];
  KOKKOS_INLINE_FUNCTION float get(int i) const { return bf16::to_float(bits[i]); }
  KOKKOS_INLINE_FUNCTION void set(int i, float f) { bits[i] = bf16::round_bits(f); }
};

// An aligned load / store of W elements (p aligned to 2 W bytes). On the device, one vector access;
// on the host a memcpy, which the compiler turns into the same without breaking aliasing rules.
template <int W>
KOKKOS_INLINE_FUNCTION Bf16Pack<W> load_pack(const bf16* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const Bf16Pack<W>*>(p);
#else
  Bf16Pack<W> v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}
template <int W>
KOKKOS_INLINE_FUNCTION void store_pack(bf16* p, const Bf16Pack<W>& v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<Bf16Pack<W>*>(p) = v;
#else
  std::memcpy(static_cast<void*>(p), &v, sizeof v);
#endif
}

constexpr int kBf16PackWidth = 8;  // 16 bytes

// The same for W consecutive fp32 values (W = 4: 16 bytes).
template <int W>
struct alignas(4 * W) F32Pack {
  float v[W];
};
template <int W>
KOKKOS_INLINE_FUNCTION F32Pack<W> load_f32_pack(const float* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const F32Pack<W>*>(p);
#else
  F32Pack<W> v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}
template <int W>
KOKKOS_INLINE_FUNCTION void store_f32_pack(float* p, const F32Pack<W>& v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<F32Pack<W>*>(p) = v;
#else
  std::memcpy(static_cast<void*>(p), &v, sizeof v);
#endif
}

// W values of either storage as floats, for kernels templated on it (p aligned to W elements).
template <int W>
KOKKOS_INLINE_FUNCTION void load_floats(const float* p, float* out) {
  const F32Pack<W> k = load_f32_pack<W>(p);
  for (int e = 0; e < W; ++e) out[e] = k.v[e];
}
template <int W>
KOKKOS_INLINE_FUNCTION void load_floats(const bf16* p, float* out) {
  const Bf16Pack<W> k = load_pack<W>(p);
  for (int e = 0; e < W; ++e) out[e] = k.get(e);
}
template <int W>
KOKKOS_INLINE_FUNCTION void store_floats(float* p, const float* in) {
  F32Pack<W> k;
  for (int e = 0; e < W; ++e) k.v[e] = in[e];
  store_f32_pack<W>(p, k);
}
template <int W>
KOKKOS_INLINE_FUNCTION void store_floats(bf16* p, const float* in) {
  Bf16Pack<W> k;
  for (int e = 0; e < W; ++e) k.set(e, in[e]);
  store_pack<W>(p, k);
}

// Whether every pointer is aligned to W elements of its type and rows of `cols` keep it so.
template <int W>
inline bool packs_fit(std::int64_t cols, std::initializer_list<std::pair<const void*, int>> pointers_and_sizes) {
  if (cols % W != 0) return false;
  for (const auto& [p, size] : pointers_and_sizes) {
    if (p != nullptr && reinterpret_cast<std::uintptr_t>(p) % (static_cast<std::uintptr_t>(size) * W) != 0) return false;
  }
  return true;
}

// Whether rows of `cols` elements from each pointer can be read in packs of kBf16PackWidth: the
// pointers 16-byte aligned and cols a multiple of the width (every row then starts aligned too).
inline bool bf16_pack_fits(std::int64_t cols, std::initializer_list<const void*> rows) {
  if (cols % kBf16PackWidth != 0) return false;
  for (const void* p : rows) {
    if (reinterpret_cast<std::uintptr_t>(p) % (2 * kBf16PackWidth) != 0) return false;
  }
  return true;
}

}  // namespace shardft
