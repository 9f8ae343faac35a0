#pragma once
// The 64-bit digests that guard checkpoints and caches against damage, fed in chunks of any size:
// XXH3-64 (Debian's libxxhash, header only; what shardft writes since checkpoint format 3), and FNV-1a 64
// (one byte at a time, ~8x slower; what older checkpoints carry, still verified). They catch damage and
// accidents, not someone who recomputes them on purpose.
//
// Text form: "<name>:<16 hex digits>", name xxh3_64 or fnv1a64, so a stored digest says how to check it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace shardft {

enum class DigestAlgorithm { fnv1a64, xxh3_64 };

const char* digest_name(DigestAlgorithm a);
// The algorithm a digest's text names; false where it names none.
bool digest_algorithm_of(const std::string& text, DigestAlgorithm* out);

class Digest64 {
 public:
  explicit Digest64(DigestAlgorithm a = DigestAlgorithm::xxh3_64);
  ~Digest64();
  Digest64(const Digest64&) = delete;
  Digest64& operator=(const Digest64&) = delete;

  void update(const void* data, std::size_t bytes);
  std::uint64_t value() const;
  std::string text() const;  // "xxh3_64:0123456789abcdef"

 private:
  struct Xxh3;
  DigestAlgorithm algorithm_;
  std::uint64_t fnv_;
  std::unique_ptr<Xxh3> xxh3_;
};

// One call over a whole buffer.
std::string digest_text(DigestAlgorithm a, const void* data, std::size_t bytes);

}  // namespace shardft
