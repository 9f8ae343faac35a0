#pragma once
// safetensors: an 8-byte little-endian header length, a JSON header
// {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...}, then the raw bytes.
// This is the F32 subset the trainer needs today; BF16/F16 and sharded sets come with the checkpoint work.
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardft {

class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TensorF32 {
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

struct NamedTensorRef {
  std::string name;
  std::vector<std::int64_t> shape;
  const float* data;
};

// Writes through a temporary file renamed into place, so a failed write never leaves a partial file.
void write_safetensors_f32(const std::string& path, const std::vector<NamedTensorRef>& tensors);

// Reads every tensor; throws FormatError naming the file and tensor when the header lies (offsets out
// of bounds or overlapping, dtype x shape != byte length, unsupported dtype).
std::map<std::string, TensorF32> read_safetensors_f32(const std::string& path);

}  // namespace shardft
