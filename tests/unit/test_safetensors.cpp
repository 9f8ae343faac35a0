// io/safetensors: F32 / BF16 / F16 round trips through the streaming writer and the reader, and a
// header that lies (offsets out of bounds or overlapping, dtype x shape != bytes, unknown dtype) is a
// FormatError naming the file and tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/safetensors.hpp"
#include "kernels/bf16.hpp"

namespace shardft {
namespace {

std::string tmp(const std::string& name) { return ::testing::TempDir() + name; }

TEST(Safetensors, StreamingWriterRoundTripsEveryDtype) {
  const std::vector<float> a = {1.f, -2.5f, 3.14159f, 1e-3f, 65504.f, -0.f};
  const std::vector<float> b = {0.5f, 0.25f};
  for (TensorDtype dt : {TensorDtype::F32, TensorDtype::BF16, TensorDtype::F16}) {
    const std::string path = tmp(std::string("rt_") + dtype_tag(dt) + ".safetensors");
    SafetensorsStreamWriter w(path, {{"a", {2, 3}}, {"b", {2}}}, dt);
    w.write_next(a.data());
    w.write_next(b.data());
    w.finish();
    const auto t = read_safetensors_f32(path);
    ASSERT_EQ(t.at("a").shape, (std::vector<std::int64_t>{2, 3}));
    for (std::size_t i = 0; i < a.size(); ++i) {
      const float want = dt == TensorDtype::F32 ? a[i] : dt == TensorDtype::BF16 ? round_to_bf16(a[i]) : a[i];
      const float tol = dt == TensorDtype::F16 ? std::abs(a[i]) * 1e-3f : 0.f;  // fp16: 10 mantissa bits
      EXPECT_NEAR(t.at("a").data[i], want, tol) << dtype_tag(dt) << " " << i;
    }
    EXPECT_EQ(t.at("b").data, b);
  }
}

TEST(Safetensors, UnfinishedWriterLeavesNoFile) {
  const std::string path = tmp("unfinished.safetensors");
  std::remove(path.c_str());
  {
    SafetensorsStreamWriter w(path, {{"a", {2}}}, TensorDtype::F32);
  }
  EXPECT_FALSE(std::ifstream(path).good());
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());
}

void write_raw(const std::string& path, const nlohmann::json& header, std::size_t data_bytes) {
  std::string text = header.dump();
  const std::uint64_t n = text.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << text << std::string(data_bytes, '\0');
}

TEST(Safetensors, HeadersThatLieAreNamed) {
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"w", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 64}}}}}, "data_offsets out of bounds"},
      {{{"w", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 12}}}}}, "dtype x shape does not match"},
      {{{"w", {{"dtype", "I64"}, {"shape", {2}}, {"data_offsets", {0, 16}}}}}, "is not supported"},
      {{{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
        {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {4, 12}}}}},
       "overlap"},
      {{{"w", {{"dtype", "F32"}, {"shape", {2}}}}}, "expected dtype, shape and data_offsets"},
      // Element counts that wrap around 2^64 (found writing the fuzz harness): 2^62 x 4 bytes is 0 bytes, modulo 2^64.
      {{{"w", {{"dtype", "F32"}, {"shape", {1ull << 31, 1ull << 31}}, {"data_offsets", {0, 0}}}}},
       "needs more bytes than the data section holds"},
      {{{"w", {{"dtype", "F16"}, {"shape", {1ull << 62, 4}}, {"data_offsets", {0, 0}}}}},
       "needs more bytes than the data section holds"},
  };
  int i = 0;
  for (const auto& [header, want] : cases) {
    const std::string path = tmp("lie" + std::to_string(i++) + ".safetensors");
    write_raw(path, header, 16);
    try {
      read_safetensors_f32(path);
      ADD_FAILURE() << header.dump() << " was accepted";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  const std::string junk = tmp("junk.safetensors");
  std::ofstream(junk) << "not a safetensors file at all";
  EXPECT_THROW(read_safetensors_f32(junk), FormatError);
}

TEST(Safetensors, AnEmptyDimensionMakesAnEmptyTensorWhateverTheOthers) {
  const std::string path = tmp("empty_dim.safetensors");
  write_raw(path, {{"w", {{"dtype", "F32"}, {"shape", {1ull << 62, 0}}, {"data_offsets", {0, 0}}}}}, 0);
  EXPECT_TRUE(read_safetensors_f32(path).at("w").data.empty());
}

}  // namespace
}  // namespace shardft
