#pragma once
// How many bytes the compute memory space can still give this process, and where that number
// comes from, for the memory preflight (parallel/memory_preflight.hpp) to compare with what a run
// will allocate before it allocates anything large.
//
//   host memory space:   min(MemAvailable of /proc/meminfo,
//                            cgroup v2 memory.max - memory.current, or v1 limit_in_bytes - usage_in_bytes)
//   CUDA memory space:   cudaMemGetInfo's free bytes on this process's device
//
// A container's limit is its cgroup's, not the machine's: a job in a 1 GiB cgroup on a 512 GiB node is
// killed at 1 GiB, so the smaller of the two is what the process can have. Host memory is shared by the
// ranks on one node; dividing it among them is the caller's business (it knows the topology).
#include <cstdint>
#include <string>

namespace shardft {

struct MemoryCapacity {
  double bytes = 0;    // < 0: unknown (nothing readable), so nothing can be checked
  std::string source;  // "MemAvailable", "cgroup v2 memory.max 1.00 GiB - memory.current 0.10 GiB", ...
};

// Host memory, reading the files under `root` ("" is the real root; tests pass a directory laid out
// as /proc/meminfo and /sys/fs/cgroup/...). This process's cgroup is found from <root>/proc/self/cgroup.
MemoryCapacity host_memory_capacity(const std::string& root = "");

// The compute memory space's capacity: the host's where it is host-accessible, else the device's.
MemoryCapacity compute_memory_capacity();

// "1.00 GiB", "512.0 MiB": bytes in binary units with three significant digits, for messages.
std::string format_bytes(double bytes);

}  // namespace shardft
