// The checkpoint digests: XXH3-64 as the xxHash reference gives it, FNV-1a 64 as before, both the same
// whether the bytes come in one piece or many, and their text naming the algorithm.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/digest64.hpp"
#include "io/hdf5_shard.hpp"

namespace shardft {
namespace {

TEST(Digest64, KnownValues) {
  EXPECT_EQ(Digest64(DigestAlgorithm::xxh3_64).value(), 0x2D06800538D394C2ull);  // XXH3_64bits of no bytes
  // shardft's FNV-1a has always started from 1469598103934665603, one digit short of FNV's offset basis
  // 14695981039346656037; format-2 checkpoints carry digests from it, so it stays as it is.
  EXPECT_EQ(Digest64(DigestAlgorithm::fnv1a64).value(), 1469598103934665603ull);
  EXPECT_EQ(digest_text(DigestAlgorithm::fnv1a64, "a", 1), "fnv1a64:44bd8ad473cd9906");  // (basis ^ 'a') * prime
  EXPECT_EQ(digest_text(DigestAlgorithm::xxh3_64, "", 0), "xxh3_64:2d06800538d394c2");
}

TEST(Digest64, ChunksGiveTheWholeDigest) {
  std::vector<unsigned char> bytes(100000);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 2654435761u >> 13);
  for (DigestAlgorithm a : {DigestAlgorithm::xxh3_64, DigestAlgorithm::fnv1a64}) {
    const std::string whole = digest_text(a, bytes.data(), bytes.size());
    for (std::size_t chunk : {1u, 7u, 240u, 4096u, 65536u}) {
      Digest64 d(a);
      for (std::size_t at = 0; at < bytes.size(); at += chunk) d.update(bytes.data() + at, std::min(chunk, bytes.size() - at));
      EXPECT_EQ(d.text(), whole) << digest_name(a) << " in chunks of " << chunk;
    }
    bytes[54321] ^= 1;
    EXPECT_NE(digest_text(a, bytes.data(), bytes.size()), whole) << "one flipped bit";
    bytes[54321] ^= 1;
  }
  EXPECT_EQ(Digest64(DigestAlgorithm::fnv1a64).value(), kChecksum64Basis);
}

TEST(Digest64, TheTextNamesTheAlgorithm) {
  DigestAlgorithm a = DigestAlgorithm::fnv1a64;
  EXPECT_TRUE(digest_algorithm_of("xxh3_64:0123456789abcdef", &a));
  EXPECT_EQ(a, DigestAlgorithm::xxh3_64);
  EXPECT_TRUE(digest_algorithm_of("fnv1a64:0123456789abcdef", &a));
  EXPECT_EQ(a, DigestAlgorithm::fnv1a64);
  EXPECT_FALSE(digest_algorithm_of("12345678901234567890", &a));  // format 2's dataset checksums: decimal FNV
  EXPECT_FALSE(digest_algorithm_of("md5:00", &a));
}

}  // namespace
}  // namespace shardft
