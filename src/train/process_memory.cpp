#include "train/process_memory.hpp"

#include <fstream>
#include <string>

namespace shardft {

std::int64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

}  // namespace shardft
