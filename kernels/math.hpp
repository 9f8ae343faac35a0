#pragma once
// Device-callable math across Kokkos versions: 3.4 keeps these in Kokkos::Experimental,
// 3.7+ and 4.x in Kokkos::. Kernels call kmath::exp etc. and build against both.
#include <Kokkos_Core.hpp>

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
}  // namespace kmath
}  // namespace shardft
