#pragma once
// Where a step's device time goes, kernel by kernel, without a profiler (the GPU machines here have no
// Nsight Systems, and Nsight Compute serialises a step into minutes). Kokkos Tools callbacks mark the
// start and end of every Kokkos kernel; GEMMs and cuDNN graphs enter as VendorKernel scopes, named like
// Kokkos kernels. Turned on by SHARDFT_KERNEL_TIMES=1 (src/cli/main.cpp).
//  - A GPU build records a CUDA event on the compute stream at each mark (kernels/cuda/stream_marks) and
//    reads them back in batches: each kernel's device time, unfenced, so the step runs as it does
//    untimed; the time between two timed launches is the device's idle time (launch gaps, host-bound
//    stretches) plus any untimed work.
//  - A host build fences and reads the clock at each mark; the time between two kernels is host time.
//
// The same callbacks count kernel launches (Kokkos kernels and VendorKernel scopes) whenever the counter
// is installed, timed or not: a step's launches per layer are one of the run's reported counts.
#include <cstddef>
#include <cstdint>
#include <string>

namespace shardft {

// Call before Kokkos::initialize. Once a program sets Kokkos Tools callbacks (the launch counter, the
// timer, kernels/device_traffic's hooks), Kokkos 4 fences the whole device before every kernel's begin
// and end callback unless the tool said at initialize that it needs no global fence: without this, every
// Kokkos kernel waits for the device to drain, and the device idles while the host launches the next
// one. The timer fences itself where it must (host builds). No effect with Kokkos 3 (no such setting).
void declare_unfenced_kernel_callbacks();
void install_kernel_timer();
bool kernel_timer_installed();
// Takes the callbacks off and forgets the times (tests).
void uninstall_kernel_timer();
// Forgets the times so far and times on (a run's first step builds graphs and sizes buffers: the report
// then shows the steps after it).
void restart_kernel_timer();
// Stops timing and keeps the times so far (the training loop has ended: what follows, the export and the
// closing summary, is not step time); launches are still counted.
void pause_kernel_timer();
// The kernels by total time, at most `top` lines, with counts and mean microseconds.
std::string kernel_timer_report(std::size_t top = 40);

// Counts every kernel launch from now on (idempotent; the timer counts too).
void install_kernel_launch_counter();
// Launches since the process started (0 until a counter or the timer is installed).
std::int64_t kernel_launches();

// A launch that is not a Kokkos kernel (a cuBLAS GEMM, a cuDNN graph), as a scope around it: counted as
// one launch, and timed under `name` when the timer is on (fenced before and after).
class VendorKernel {
 public:
  explicit VendorKernel(const char* name);
  ~VendorKernel();
  VendorKernel(const VendorKernel&) = delete;
  VendorKernel& operator=(const VendorKernel&) = delete;

 private:
  std::uint64_t id_ = 0;
};

// Host time in a named phase (uploading a batch, waiting for the device, logging), reported after the
// kernels while the timer runs: what the host does while the device idles between kernels.
class HostPhase {
 public:
  explicit HostPhase(const char* name);
  ~HostPhase();
  HostPhase(const HostPhase&) = delete;
  HostPhase& operator=(const HostPhase&) = delete;

 private:
  const char* name_ = nullptr;  // null: the timer is off
  std::int64_t start_ns_ = 0;
};

// Launches inside this scope are not counted: work a CPU build does that a GPU build does not launch
// (widening bf16 tiles for sgemm), so the count stays what the GPU path launches.
class UncountedLaunches {
 public:
  UncountedLaunches();
  ~UncountedLaunches();
  UncountedLaunches(const UncountedLaunches&) = delete;
  UncountedLaunches& operator=(const UncountedLaunches&) = delete;
};

}  // namespace shardft
