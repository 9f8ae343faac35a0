#include "io/digest64.hpp"

#include <cstdio>
#include <stdexcept>

#include "io/hdf5_shard.hpp"  // checksum64: FNV-1a 64

// The whole of XXH3 inlined here: nothing to link, nothing to ship beside the binary.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace shardft {

struct Digest64::Xxh3 {
  XXH3_state_t state;
};

const char* digest_name(DigestAlgorithm a) { return a == DigestAlgorithm::xxh3_64 ? "xxh3_64" : "fnv1a64"; }

bool digest_algorithm_of(const std::string& text, DigestAlgorithm* out) {
  for (DigestAlgorithm a : {DigestAlgorithm::xxh3_64, DigestAlgorithm::fnv1a64}) {
    const std::string prefix = std::string(digest_name(a)) + ":";
    if (text.compare(0, prefix.size(), prefix) == 0) {
      *out = a;
      return true;
    }
  }
  return false;
}

Digest64::Digest64(DigestAlgorithm a) : algorithm_(a), fnv_(kChecksum64Basis) {
  if (a != DigestAlgorithm::xxh3_64) return;
  xxh3_ = std::make_unique<Xxh3>();
  if (XXH3_64bits_reset(&xxh3_->state) != XXH_OK) throw std::runtime_error("XXH3_64bits_reset failed");
}

Digest64::~Digest64() = default;

void Digest64::update(const void* data, std::size_t bytes) {
  if (bytes == 0) return;
  if (xxh3_) {
    XXH3_64bits_update(&xxh3_->state, data, bytes);
  } else {
    fnv_ = checksum64(data, bytes, fnv_);
  }
}

std::uint64_t Digest64::value() const { return xxh3_ ? XXH3_64bits_digest(&xxh3_->state) : fnv_; }

std::string Digest64::text() const {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s:%016llx", digest_name(algorithm_), static_cast<unsigned long long>(value()));
  return buf;
}

std::string digest_text(DigestAlgorithm a, const void* data, std::size_t bytes) {
  Digest64 d(a);
  d.update(data, bytes);
  return d.text();
}

}  // namespace shardft
