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
// A borrowed [rows, cols] matrix whose rows need not be back to back: columns [c0, c0 + cols) of a wider
// row-major array (q, k and v as column blocks of one [tokens, q + k + v] GEMM output). Elements of a row
// are contiguous (stride_1() == 1); stride_0() is the row stride. An Unmanaged2 converts to it.
template <class T>
using Strided2 = Kokkos::View<T**, Kokkos::LayoutStride, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// Columns [c0, c0 + cols) of x as a Strided2.
template <class T>
Strided2<T> columns_of(const Unmanaged2<T>& x, std::int64_t c0, std::int64_t cols) {
  const Kokkos::LayoutStride layout(x.extent(0), x.stride_0(), static_cast<std::size_t>(cols), 1);
  return Strided2<T>(x.data() + c0, layout);
}

// Whether the kernels' memory is the device's (a GPU build): where a kernel has a device form and a host
// form (whose results keep their bits), it picks by this.
constexpr bool kComputeOnDevice = !Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible;

// Every kernel takes its functor as launch arguments (CUDA allows 4 KiB; a larger one fails to compile)
// instead of through Kokkos' constant-memory buffer, which Kokkos 4 picks by default for functors of 512
// bytes or more and which makes the host wait, at each such launch, until the previous one has finished
// (Kokkos_Cuda_KernelLaunch.hpp): the host then cannot queue work ahead of the device, and the device
// idles between kernels. The host backends ignore the hint.
using LightLaunch = Kokkos::Experimental::WorkItemProperty::HintLightWeight_t;
using Range = Kokkos::RangePolicy<ExecSpace, LightLaunch>;
using TeamLaunch = Kokkos::TeamPolicy<ExecSpace, LightLaunch>;

constexpr int kIgnoreIndex = -100;  // label value that takes no loss (HF / PyTorch convention)

}  // namespace shardft
