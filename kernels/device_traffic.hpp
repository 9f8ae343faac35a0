#pragma once
// What passes between the host and the device, counted. On a GPU each of these stalls a step: a copy
// over PCIe, the host waiting for the device (a reduction read on the host, a collective waited for on
// the host), an allocation (cudaMalloc, and a fence of the whole device when it is freed). A training
// step's hot path (forward, backward, gradient reduction, clipping, optimizer, weight refresh) makes
// none once its first step has sized every buffer; a batch's inputs must cross and are counted apart.
//
// Copies and syncs are counted where our code makes them, on every backend: on Serial and OpenMP
// "device" memory is host memory and nothing moves, but the same call sites run, so a test there
// counts what would be a copy or a wait on a GPU. Allocations come from Kokkos' tool hooks
// (install_device_traffic_hooks), which also give live and peak bytes of the memory space the kernels
// compute in (device memory on a GPU build; host buffers there are not counted), and what held them.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace shardft {

struct DeviceTraffic {
  std::int64_t copies = 0, copy_bytes = 0;      // host <-> device, other than a batch's inputs
  std::int64_t syncs = 0;                       // the host waiting for the device
  std::int64_t allocations = 0, allocated_bytes = 0;
  std::int64_t uploads = 0, upload_bytes = 0;   // a batch's inputs, host -> device
  std::map<std::string, std::int64_t> sites;    // copies, syncs and allocations by where they happened

  // What happened after `earlier` (a snapshot of the same counters).
  DeviceTraffic since(const DeviceTraffic& earlier) const;
  bool none_but_uploads() const { return copies == 0 && syncs == 0 && allocations == 0; }
  // "0 copies (0 B), 0 host syncs, 0 allocations (0 B); inputs: 4 uploads (32 KiB)" and, when there
  // are any, the first max_sites sites: " [sync sum_squares x1, ...]".
  std::string describe(std::size_t max_sites = 12) const;
};

// The counts since the process started.
DeviceTraffic device_traffic();

void count_device_copy(const char* site, std::size_t bytes);
void count_host_sync(const char* site);

// A point where the host waits for the device once, however many waits it makes there in a row (the
// step's end: each group's collectives, then the read-back). Nothing is enqueued between those waits,
// so the device drains once: counted as one host sync, named by the point; the waits inside it are
// not counted again.
class HostSyncPoint {
 public:
  explicit HostSyncPoint(const char* site);
  ~HostSyncPoint();
  HostSyncPoint(const HostSyncPoint&) = delete;
  HostSyncPoint& operator=(const HostSyncPoint&) = delete;
};
void count_input_upload(std::size_t bytes);

// Sets Kokkos' allocate / deallocate hooks (once per process, after Kokkos is initialized; again is a
// no-op). Without them allocations are not counted and live / peak bytes stay 0.
void install_device_traffic_hooks();
std::int64_t device_live_bytes();
std::int64_t device_peak_bytes();
void reset_device_peak();  // the high-water mark starts again at the live bytes
// The live allocations when the peak was reached, summed by Kokkos label, largest first (at most `most`).
std::vector<std::pair<std::string, std::int64_t>> device_peak_holders(std::size_t most);
// "1234 MiB in allocations of the compute memory space; the largest then: zero_master 560 MiB, ..."
std::string describe_device_peak(std::size_t most = 10);

}  // namespace shardft
