#include "kernels/device_traffic.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <unordered_map>

namespace shardft {

namespace {

struct Counters {
  DeviceTraffic traffic;
  std::int64_t live = 0, peak = 0;
  bool hooked = false;
  // Live allocations by address (label, bytes), and by label when live bytes last reached their peak.
  std::unordered_map<const void*, std::pair<std::string, std::int64_t>> by_address;
  std::map<std::string, std::int64_t> live_by_label, peak_by_label;
};

Counters& counters() {
  static Counters c;
  return c;
}

void note_site(const std::string& site) { ++counters().traffic.sites[site]; }

// Only the memory space the kernels compute in is counted: on a GPU build, host buffers (a checkpoint's
// staging, a tokenizer's tables) are neither device allocations nor device memory.
bool in_compute_space(const Kokkos::Tools::SpaceHandle& space) {
  return std::strcmp(space.name, Kokkos::DefaultExecutionSpace::memory_space::name()) == 0;
}

void on_allocate(Kokkos::Tools::SpaceHandle space, const char* label, const void* ptr, std::uint64_t size) {
  // Kokkos's CUDA backend reports a zero-byte "TeamScratchMemory" allocation at team launches that
  // ask for no scratch: nothing is allocated.
  if (size == 0 || !in_compute_space(space)) return;
  Counters& c = counters();
  const std::string name = label && *label ? label : "(unnamed)";
  const auto bytes = static_cast<std::int64_t>(size);
  ++c.traffic.allocations;
  c.traffic.allocated_bytes += bytes;
  note_site("alloc " + name);
  c.live += bytes;
  c.live_by_label[name] += bytes;
  c.by_address[ptr] = {name, bytes};
  if (c.live > c.peak) {
    c.peak = c.live;
    c.peak_by_label = c.live_by_label;
  }
}

void on_deallocate(Kokkos::Tools::SpaceHandle space, const char*, const void* ptr, std::uint64_t size) {
  if (size == 0 || !in_compute_space(space)) return;
  Counters& c = counters();
  c.live -= static_cast<std::int64_t>(size);
  const auto it = c.by_address.find(ptr);
  if (it == c.by_address.end()) return;  // allocated before the hooks were set
  const auto held = c.live_by_label.find(it->second.first);
  if (held != c.live_by_label.end() && (held->second -= it->second.second) <= 0) c.live_by_label.erase(held);
  c.by_address.erase(it);
}

std::string bytes_text(std::int64_t b) {
  std::ostringstream s;
  if (b < 10 * 1024) {
    s << b << " B";
  } else if (b < 10 * 1024 * 1024) {
    s << b / 1024 << " KiB";
  } else {
    s << b / (1024 * 1024) << " MiB";
  }
  return s.str();
}

}  // namespace

DeviceTraffic DeviceTraffic::since(const DeviceTraffic& earlier) const {
  DeviceTraffic d;
  d.copies = copies - earlier.copies;
  d.copy_bytes = copy_bytes - earlier.copy_bytes;
  d.syncs = syncs - earlier.syncs;
  d.allocations = allocations - earlier.allocations;
  d.allocated_bytes = allocated_bytes - earlier.allocated_bytes;
  d.uploads = uploads - earlier.uploads;
  d.upload_bytes = upload_bytes - earlier.upload_bytes;
  for (const auto& [site, n] : sites) {
    const auto it = earlier.sites.find(site);
    const std::int64_t before = it == earlier.sites.end() ? 0 : it->second;
    if (n > before) d.sites[site] = n - before;
  }
  return d;
}

std::string DeviceTraffic::describe(std::size_t max_sites) const {
  std::ostringstream s;
  s << copies << " copies (" << bytes_text(copy_bytes) << "), " << syncs << " host syncs, " << allocations
    << " allocations (" << bytes_text(allocated_bytes) << "); inputs: " << uploads << " uploads ("
    << bytes_text(upload_bytes) << ")";
  if (!sites.empty() && max_sites > 0) {
    s << " [";
    const char* sep = "";
    std::size_t shown = 0;
    for (const auto& [site, n] : sites) {
      if (shown++ == max_sites) {
        s << sep << "and " << sites.size() - max_sites << " more";
        break;
      }
      s << sep << site << " x" << n;
      sep = ", ";
    }
    s << "]";
  }
  return s.str();
}

DeviceTraffic device_traffic() { return counters().traffic; }

void count_device_copy(const char* site, std::size_t bytes) {
  DeviceTraffic& t = counters().traffic;
  ++t.copies;
  t.copy_bytes += static_cast<std::int64_t>(bytes);
  note_site(std::string("copy ") + site);
}

static int g_sync_point_depth = 0;  // HostSyncPoints open (the host thread's; the step runs on one)

void count_host_sync(const char* site) {
  if (g_sync_point_depth > 0) return;
  ++counters().traffic.syncs;
  note_site(std::string("sync ") + site);
}

HostSyncPoint::HostSyncPoint(const char* site) {
  count_host_sync(site);
  ++g_sync_point_depth;
}

HostSyncPoint::~HostSyncPoint() { --g_sync_point_depth; }

void count_input_upload(std::size_t bytes) {
  DeviceTraffic& t = counters().traffic;
  ++t.uploads;
  t.upload_bytes += static_cast<std::int64_t>(bytes);
}

void install_device_traffic_hooks() {
  Counters& c = counters();
  if (c.hooked) return;
  Kokkos::Tools::Experimental::set_allocate_data_callback(&on_allocate);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(&on_deallocate);
  c.hooked = true;
}

std::int64_t device_live_bytes() { return counters().live; }
std::int64_t device_peak_bytes() { return counters().peak; }
void reset_device_peak() {
  Counters& c = counters();
  c.peak = c.live;
  c.peak_by_label = c.live_by_label;
}

std::vector<std::pair<std::string, std::int64_t>> device_peak_holders(std::size_t most) {
  std::vector<std::pair<std::string, std::int64_t>> held(counters().peak_by_label.begin(), counters().peak_by_label.end());
  std::stable_sort(held.begin(), held.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (held.size() > most) held.resize(most);
  return held;
}

std::string describe_device_peak(std::size_t most) {
  std::ostringstream s;
  s << bytes_text(device_peak_bytes()) << " in allocations of the compute memory space; the largest then:";
  const char* sep = " ";
  for (const auto& [label, bytes] : device_peak_holders(most)) {
    s << sep << label << " " << bytes_text(bytes);
    sep = ", ";
  }
  return s.str();
}

}  // namespace shardft
