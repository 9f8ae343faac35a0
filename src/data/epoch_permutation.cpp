// Deterministic shuffling of the sample order. Every rank, every platform and every resume must see
// the same order for the same (seed, epoch), so nothing here comes from <random>: std::shuffle and the
// standard distributions are implementation-defined and differ between libstdc++, libc++ and MSVC.
#include <stdexcept>
#include <string>
#include <utility>

#include "data/sft_data.hpp"

namespace shardft {
namespace {

// SplitMix64 (Steele, Lea & Flood 2014): a tiny, fully specified 64-bit generator with good statistical
// quality for shuffling. Its output finalizer also serves to scramble the (seed, epoch) pair.
std::uint64_t splitmix64_finalize(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t state) : state_(state) {}
  std::uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ULL;
    return splitmix64_finalize(state_);
  }
  // Uniform in [0, bound) without modulo bias: reject the lowest (2^64 mod bound) raw values so the
  // rest split evenly into `bound` classes.
  std::uint64_t below(std::uint64_t bound) {
    const std::uint64_t threshold = (0 - bound) % bound;  // == 2^64 mod bound
    for (;;) {
      const std::uint64_t r = next();
      if (r >= threshold) return r % bound;
    }
  }

 private:
  std::uint64_t state_;
};

}  // namespace

std::vector<std::int64_t> epoch_permutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch) {
  if (n < 0) throw std::invalid_argument("epoch_permutation: n must be >= 0, got " + std::to_string(n));
  // Scramble seed and epoch separately before combining, so (seed, epoch+1) and (seed+1, epoch) are
  // unrelated streams.
  SplitMix64 rng(splitmix64_finalize(seed) ^
                 splitmix64_finalize(static_cast<std::uint64_t>(epoch) + 0xD1B54A32D192ED03ULL));
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[i] = i;
  // Fisher-Yates, from the back: position i takes a uniform pick among the first i+1.
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(i) + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

}  // namespace shardft
