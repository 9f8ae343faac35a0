#pragma once
// An independent PNG reader for tests: checks the signature, IHDR (8-bit RGB, no interlace), each
// chunk's CRC-32 (computed bit by bit, not with zlib's table), IEND, and inflates the IDAT with zlib
// to return the pixels. Structure problems are gtest failures.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace shardft::testing_png {

// CRC-32 (ISO-HDLC, PNG's), bit by bit: independent of the table zlib's crc32 uses.
inline std::uint32_t crc32_bitwise(const std::uint8_t* p, std::size_t n) {
  std::uint32_t c = 0xffffffffu;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return c ^ 0xffffffffu;
}

inline std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
}

struct DecodedPng {
  int width = 0, height = 0;
  std::vector<std::string> chunk_types;
  std::vector<std::uint8_t> rgb;
};

// Checks the structure with gtest assertions and returns the pixels.
inline DecodedPng check_and_decode(const std::vector<std::uint8_t>& png) {
  DecodedPng out;
  const std::uint8_t signature[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  EXPECT_GE(png.size(), 8u);
  EXPECT_EQ(0, std::memcmp(png.data(), signature, 8));
  std::vector<std::uint8_t> idat;
  std::size_t at = 8;
  while (at + 12 <= png.size()) {
    const std::uint32_t len = be32(&png[at]);
    EXPECT_LE(at + 12 + len, png.size()) << "chunk runs past the end";
    if (at + 12 + len > png.size()) break;
    const std::string type(reinterpret_cast<const char*>(&png[at + 4]), 4);
    const std::uint8_t* data = &png[at + 8];
    EXPECT_EQ(be32(data + len), crc32_bitwise(&png[at + 4], 4 + len)) << "CRC of chunk " << type;
    out.chunk_types.push_back(type);
    if (type == "IHDR") {
      EXPECT_EQ(len, 13u);
      out.width = static_cast<int>(be32(data));
      out.height = static_cast<int>(be32(data + 4));
      EXPECT_EQ(data[8], 8) << "bit depth";
      EXPECT_EQ(data[9], 2) << "colour type RGB";
      EXPECT_EQ(data[10], 0) << "compression";
      EXPECT_EQ(data[11], 0) << "filter method";
      EXPECT_EQ(data[12], 0) << "interlace";
    } else if (type == "IDAT") {
      idat.insert(idat.end(), data, data + len);
    } else if (type == "IEND") {
      EXPECT_EQ(len, 0u);
    }
    at += 12 + len;
  }
  EXPECT_EQ(at, png.size()) << "bytes after the last chunk";
  const std::size_t row = static_cast<std::size_t>(out.width) * 3 + 1;
  std::vector<std::uint8_t> raw(row * static_cast<std::size_t>(out.height));
  uLongf raw_size = raw.size();
  EXPECT_EQ(uncompress(raw.data(), &raw_size, idat.data(), idat.size()), Z_OK);
  EXPECT_EQ(raw_size, raw.size());
  for (int y = 0; y < out.height; ++y) {
    EXPECT_EQ(raw[row * y], 0) << "filter type of row " << y;
    out.rgb.insert(out.rgb.end(), raw.begin() + static_cast<std::ptrdiff_t>(row * y + 1),
                   raw.begin() + static_cast<std::ptrdiff_t>(row * (y + 1)));
  }
  return out;
}

}  // namespace shardft::testing_png
