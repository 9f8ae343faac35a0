#include "config/memory_size.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <utility>

namespace shardft {

double parse_memory_size(const std::string& text) {
  static const std::pair<const char*, double> units[] = {
      {"B", 1},      {"KB", 1e3},         {"MB", 1e6},           {"GB", 1e9},           {"TB", 1e12},
      {"KiB", 1024}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  const std::string problem =
      "expects a size such as 16GB, 12GiB or 512MB (KB/MB/GB/TB: powers of 1000; KiB/MiB/GiB/TiB: of 1024), got '" +
      text + "'";
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || errno == ERANGE || !std::isfinite(v) || !(v > 0)) throw std::invalid_argument(problem);
  std::string unit(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  if (unit.empty()) return v;
  for (const auto& [name, scale] : units) {
    if (unit == name) return v * scale;
  }
  throw std::invalid_argument(problem);
}

std::string canonical_memory_size_text(const std::string& text) {
  if (text == "auto" || text == "none") return text;
  try {
    parse_memory_size(text);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("expects auto, none or a size such as 16GB, 12GiB or 512MB, got '" + text + "'");
  }
  return text;
}

std::string canonical_shard_size_text(const std::string& text) {
  if (parse_memory_size(text) < 1) {
    throw std::invalid_argument("expects a size of at least one byte such as 5GB or 500MB, got '" + text + "'");
  }
  return text;
}

double memory_limit_bytes(const std::string& max_memory_per_rank) {
  if (max_memory_per_rank == "auto") return -1;
  if (max_memory_per_rank == "none") return 0;
  return parse_memory_size(max_memory_per_rank);
}

}  // namespace shardft
