#include "kernels/device_traffic.hpp"

#include <Kokkos_Core.hpp>

#include <sstream>

namespace shardft {

namespace {

struct Counters {
  DeviceTraffic traffic;
  std::int64_t live = 0, peak = 0;
  bool hooked = false;
};

Counters& counters() {
  static Counters c;
  return c;
}

void note_site(const std::string& site) { ++counters().traffic.sites[site]; }

void on_allocate(Kokkos::Tools::SpaceHandle, const char* label, const void*, std::uint64_t size) {
  // Kokkos's CUDA backend reports a zero-byte "TeamScratchMemory" allocation at team launches that
  // ask for no scratch: nothing is allocated.
  if (size == 0) return;
  Counters& c = counters();
  ++c.traffic.allocations;
  c.traffic.allocated_bytes += static_cast<std::int64_t>(size);
  note_site(std::string("alloc ") + (label && *label ? label : "(unnamed)"));
  c.live += static_cast<std::int64_t>(size);
  if (c.live > c.peak) c.peak = c.live;
}

void on_deallocate(Kokkos::Tools::SpaceHandle, const char*, const void*, std::uint64_t size) {
  counters().live -= static_cast<std::int64_t>(size);
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

void count_host_sync(const char* site) {
  ++counters().traffic.syncs;
  note_site(std::string("sync ") + site);
}

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
void reset_device_peak() { counters().peak = counters().live; }

}  // namespace shardft
