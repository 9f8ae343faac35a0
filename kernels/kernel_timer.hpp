#pragma once
// Where a step's device time goes, kernel by kernel, without a profiler (the GPU machines here have no
// Nsight Systems, and Nsight Compute serialises a step into minutes): Kokkos Tools callbacks fence
// before and after every Kokkos kernel and add the wall time to the kernel's name. The time between
// two Kokkos kernels, also fenced, is the device work outside Kokkos (cuBLAS GEMMs, NCCL) plus host
// time; it is reported as one line. Fencing hides no launch latency, so the run is slower than an
// untimed one: read the shares, not the sum. Turned on by SHARDFT_KERNEL_TIMES=1 (src/cli/main.cpp).
#include <cstddef>
#include <string>

namespace shardft {

void install_kernel_timer();
bool kernel_timer_installed();
// Takes the callbacks off and forgets the times (tests).
void uninstall_kernel_timer();
// The kernels by total time, at most `top` lines, with counts and mean microseconds.
std::string kernel_timer_report(std::size_t top = 40);

}  // namespace shardft
