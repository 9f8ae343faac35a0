#pragma once
// safetensors: an 8-byte little-endian header length, a JSON header
// {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...}, then the raw bytes.
// Tensors are read and written as fp32 in memory; on disk F32, BF16 and F16. U8 tensors (bitsandbytes'
// packed 4-bit weights and their companions) are read as bytes only.
#include <cstdint>
#include <cstdio>
#include <fstream>
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

enum class TensorDtype { F32, BF16, F16, U8 };  // U8: read as bytes (read_bytes), never written
const char* dtype_tag(TensorDtype t);      // "F32", "BF16", "F16", "U8"
std::size_t dtype_bytes(TensorDtype t);

// Reads pieces of tensors without loading the file: the header is parsed and checked (the same
// checks as read_safetensors_f32) when opened, then read() fetches any element range of a tensor,
// converted to fp32. A rank that owns a slice of a weight reads just that slice.
class SafetensorsReader {
 public:
  struct Info {
    TensorDtype dtype = TensorDtype::F32;
    std::vector<std::int64_t> shape;
    std::int64_t numel = 0;
    std::uint64_t begin = 0;  // byte offset in the data section
  };
  explicit SafetensorsReader(const std::string& path);
  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const Info& info(const std::string& name) const;  // throws FormatError naming the file and tensor
  // Elements [first, first + count) of the row-major tensor into out; a U8 tensor is a FormatError.
  void read(const std::string& name, std::int64_t first, std::int64_t count, float* out);
  // A U8 tensor's bytes, all of them; another dtype is a FormatError naming the file and tensor.
  std::vector<std::uint8_t> read_bytes(const std::string& name);

 private:
  std::string path_;
  std::ifstream in_;
  std::uint64_t data_start_ = 0;
  std::map<std::string, Info> tensors_;
};

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
