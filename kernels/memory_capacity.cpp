#include "kernels/memory_capacity.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "kernels/device_backend.hpp"
#include "kernels/types.hpp"

namespace shardft {

namespace {

// The first line of a file as a number of bytes; "max" (cgroup v2's no-limit) and anything unreadable
// give -1.
double read_bytes(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return -1;
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    return used == text.size() && v >= 0 ? v : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

double mem_available(const std::string& root) {
  std::ifstream in(root + "/proc/meminfo");
  std::string key, unit;
  double kib = 0;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024.0;
  }
  return -1;
}

// This process's cgroup path for the v2 hierarchy ("0::/path") or v1's memory controller
// ("N:...memory...:/path"); found tells which.
struct CgroupPath {
  std::string v2, v1;
  bool has_v2 = false, has_v1 = false;
};

CgroupPath own_cgroup(const std::string& root) {
  CgroupPath p;
  std::ifstream in(root + "/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      p.v2 = path, p.has_v2 = true;
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      p.v1 = path, p.has_v1 = true;
    }
  }
  return p;
}

// The tightest (limit - usage) over the cgroup and its ancestors: a parent's limit binds its children.
// Returns false when no level has a limit.
bool cgroup_headroom(const std::string& base, std::string path, const char* limit_file, const char* usage_file,
                     double& headroom, std::string& where) {
  constexpr double kNoLimit = 1e18;  // v1 writes "no limit" as a number near 2^63
  bool found = false;
  while (true) {
    const std::string dir = base + (path == "/" ? "" : path);
    const double limit = read_bytes(dir + "/" + limit_file);
    if (limit >= 0 && limit < kNoLimit) {
      const double usage = read_bytes(dir + "/" + usage_file);
      const double room = limit - (usage > 0 ? usage : 0);
      if (!found || room < headroom) {
        headroom = room;
        where = std::string(limit_file) + " " + format_bytes(limit) + " - " + usage_file + " " +
                format_bytes(usage > 0 ? usage : 0) + " (" + dir + ")";
      }
      found = true;
    }
    if (path.empty() || path == "/") break;
    const std::size_t slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return found;
}

}  // namespace

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = bytes;
  while ((v >= 1024 || v <= -1024) && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 || v <= -100 ? "%.0f %s" : v >= 10 || v <= -10 ? "%.1f %s" : "%.2f %s", v,
                units[u]);
  return buf;
}

MemoryCapacity host_memory_capacity(const std::string& root) {
  MemoryCapacity cap;
  const double available = mem_available(root);
  if (available >= 0) cap = {available, "MemAvailable " + format_bytes(available) + " (" + root + "/proc/meminfo)"};
  const CgroupPath cg = own_cgroup(root);
  double room = 0;
  std::string where;
  const bool limited =
      (cg.has_v2 && cgroup_headroom(root + "/sys/fs/cgroup", cg.v2, "memory.max", "memory.current", room, where)) ||
      (cg.has_v1 && cgroup_headroom(root + "/sys/fs/cgroup/memory", cg.v1, "memory.limit_in_bytes",
                                    "memory.usage_in_bytes", room, where));
  if (limited && (cap.bytes < 0 || cap.source.empty() || room < cap.bytes)) {
    cap = {room > 0 ? room : 0, "cgroup " + where};
  }
  if (cap.source.empty()) cap.bytes = -1;
  return cap;
}

MemoryCapacity compute_memory_capacity() {
  double free_bytes = 0, total_bytes = 0;
  if (kComputeOnDevice && device_backend::device_memory(free_bytes, total_bytes)) {
    return {free_bytes, "cudaMemGetInfo: " + format_bytes(free_bytes) + " free of " + format_bytes(total_bytes)};
  }
  return host_memory_capacity();
}

}  // namespace shardft
