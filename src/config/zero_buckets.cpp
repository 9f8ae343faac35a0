#include "config/zero_buckets.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace shardft {

std::string canonical_bucket_size_text(const std::string& text) {
  if (text == "auto") return text;
  const std::string problem = "expects \"auto\" or a whole number of elements >= 1, got '" + text + "'";
  if (text.empty()) throw std::invalid_argument(problem);
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  // Up to 2^53 every whole number is exact in a double, far beyond any bucket.
  if (*end != '\0' || errno == ERANGE || !(v >= 1) || v > 9007199254740992.0 || std::floor(v) != v) {
    throw std::invalid_argument(problem);
  }
  return std::to_string(static_cast<std::int64_t>(v));
}

namespace {
std::int64_t elements_or(const std::string& text, std::int64_t when_auto) {
  const std::string canonical = canonical_bucket_size_text(text);
  return canonical == "auto" ? when_auto : std::stoll(canonical);
}
}  // namespace

std::int64_t resolved_reduce_bucket_size(const TrainConfig& cfg) {
  const std::int64_t h = cfg.model.hidden_size;
  return elements_or(cfg.reduce_bucket_size, h * h);
}

std::int64_t resolved_allgather_bucket_size(const TrainConfig& cfg) {
  return elements_or(cfg.allgather_bucket_size, 500000000);
}

}  // namespace shardft
