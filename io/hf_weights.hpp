#pragma once
// The weights of a Hugging Face model directory: `model.safetensors`, or a sharded set named by
// `model.safetensors.index.json` ({"weight_map": {tensor name: file name}}). Files are opened on
// first use and read piecewise, so a rank reads only the elements it owns.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.hpp"

namespace shardft {

class HfModelWeights {
 public:
  // Throws FormatError naming the directory when neither file exists, or the index file and key when
  // the index is malformed or names a file that is missing.
  explicit HfModelWeights(const std::string& dir);

  bool has(const std::string& name) const { return file_of_.count(name) != 0; }
  std::vector<std::string> names() const;
  // The shape on disk; throws FormatError when the tensor is in no file.
  const std::vector<std::int64_t>& shape(const std::string& name);
  // Elements [first, first + count) of the row-major tensor, converted to fp32.
  void read(const std::string& name, std::int64_t first, std::int64_t count, float* out);
  // "dir/model.safetensors" or "dir/model.safetensors.index.json", for messages.
  const std::string& description() const { return description_; }

 private:
  SafetensorsReader& reader_for(const std::string& name);
  std::string dir_, description_;
  std::map<std::string, std::string> file_of_;                          // tensor -> file path
  std::map<std::string, std::unique_ptr<SafetensorsReader>> readers_;   // file path -> open reader
};

}  // namespace shardft
