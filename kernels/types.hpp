#pragma once
// The memory and execution spaces every kernel runs in, and the View aliases they take.
// Views carry their memory space in the type: on the CPU build this is HostSpace (Serial),
// on the GPU build the CUDA space, and the same kernel source serves both.
#include <Kokkos_Core.hpp>
#include <cstdint>

namespace shardft {

using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemSpace = ExecSpace::memory_space;
using HostSpace = Kokkos::HostSpace;

// Row-major, like HF safetensors: a weight [out, in] is View2 with extent(0) = out.
template <class T>
using View1 = Kokkos::View<T*, Kokkos::LayoutRight, MemSpace>;
template <class T>
using View2 = Kokkos::View<T**, Kokkos::LayoutRight, MemSpace>;
template <class T>
using View4 = Kokkos::View<T****, Kokkos::LayoutRight, MemSpace>;
// A borrowed view over memory owned elsewhere (a slice of a flat parameter buffer).
template <class T>
using Unmanaged1 = Kokkos::View<T*, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T>
using Unmanaged2 = Kokkos::View<T**, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

using Range = Kokkos::RangePolicy<ExecSpace>;

constexpr int kIgnoreIndex = -100;  // label value that takes no loss (HF / PyTorch convention)

}  // namespace shardft
