#pragma once
// Device-callable math across Kokkos versions: 3.4 keeps these in Kokkos::Experimental,
// 3.7+ and 4.x in Kokkos::. Kernels call kmath::exp etc. and build against both.
#include <Kokkos_Core.hpp>
#include <cstdint>

namespace shardft {
namespace kmath {
#if KOKKOS_VERSION < 30700
using Kokkos::Experimental::cos;
using Kokkos::Experimental::exp;
using Kokkos::Experimental::isfinite;
using Kokkos::Experimental::log;
using Kokkos::Experimental::sin;
using Kokkos::Experimental::sqrt;
#else
using Kokkos::cos;
using Kokkos::exp;
using Kokkos::isfinite;
using Kokkos::log;
using Kokkos::sin;
using Kokkos::sqrt;
#endif
// splitmix64's finaliser of z + golden ratio: a counter-based hash, so a value keyed by an element's
// index is the same however the buffer is split across ranks, on host or device alike.
KOKKOS_INLINE_FUNCTION std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace kmath
}  // namespace shardft
