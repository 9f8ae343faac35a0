#pragma once
// safetensors: an 8-byte little-endian header length, a JSON header
// {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...}, then the raw bytes.
// This is the F32 subset the trainer needs today; BF16/F16 and sharded sets come with the checkpoint work.
#include <cstdint>
#include <cstdio>
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

// Reads every tensor (F32, BF16 or F16, converted to fp32); throws FormatError naming the file and
// tensor when the header lies (offsets out of bounds or overlapping, dtype x shape != byte length,
// unsupported dtype).
std::map<std::string, TensorF32> read_safetensors_f32(const std::string& path);

enum class TensorDtype { F32, BF16, F16 };
const char* dtype_tag(TensorDtype t);      // "F32", "BF16", "F16"
std::size_t dtype_bytes(TensorDtype t);

struct TensorEntry {
  std::string name;
  std::vector<std::int64_t> shape;
  std::int64_t numel() const;
};

// Writes a safetensors file one tensor at a time, so memory never holds more than the tensor being
// written: the header (every name, shape and offset) first, then each tensor's bytes in order.
// Goes through path + ".tmp", renamed into place by finish().
class SafetensorsStreamWriter {
 public:
  SafetensorsStreamWriter(const std::string& path, std::vector<TensorEntry> tensors, TensorDtype dtype);
  ~SafetensorsStreamWriter();
  void write_next(const float* data);  // the next tensor in the order given, converted to dtype
  void finish();
  std::uint64_t data_bytes() const { return data_bytes_; }

 private:
  struct Impl;
  std::string path_;
  std::vector<TensorEntry> tensors_;
  TensorDtype dtype_;
  std::size_t next_ = 0;
  std::uint64_t data_bytes_ = 0;
  std::FILE* out_ = nullptr;
};

}  // namespace shardft
