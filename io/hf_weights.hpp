#pragma once
// The weights of a Hugging Face model directory: `model.safetensors`, or a sharded set named by
// `model.safetensors.index.json` ({"weight_map": {tensor name: file name}}). Files are opened on
// first use and read piecewise, so a rank reads only the elements it owns. A bitsandbytes 4-bit save
// (io/bnb4_weights.hpp) shows its quantized weights under their own names and logical shapes (the
// companion tensors are not listed); read() dequantizes them, read_nf4() gives their bytes as they are.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/bnb4_weights.hpp"
#include "io/safetensors.hpp"

namespace shardft {

class HfModelWeights {
 public:
  // Throws FormatError naming the directory when neither file exists, or the index file and key when
  // the index is malformed or names a file that is missing, and (find_bnb4_weights) naming the tensor
  // when a 4-bit weight is not one shardft reads or misses a companion.
  explicit HfModelWeights(const std::string& dir);

  bool has(const std::string& name) const { return file_of_.count(name) != 0; }
  std::vector<std::string> names() const;
  // The shape on disk; throws FormatError when the tensor is in no file.
  const std::vector<std::int64_t>& shape(const std::string& name);
  // Elements [first, first + count) of the row-major tensor, converted to fp32 (a 4-bit weight:
  // dequantized, the whole matrix each call).
  void read(const std::string& name, std::int64_t first, std::int64_t count, float* out);
  // Whether `name` is stored as bitsandbytes 4-bit, and then its bytes as they are (in MemSpace).
  bool is_nf4(const std::string& name) const { return nf4_.count(name) != 0; }
  Nf4Tensor read_nf4(const std::string& name);
  // "dir/model.safetensors" or "dir/model.safetensors.index.json", for messages.
  const std::string& description() const { return description_; }

 private:
  SafetensorsReader& reader_for(const std::string& name);
  std::string dir_, description_;
  std::map<std::string, std::string> file_of_;                          // tensor -> file path
  std::map<std::string, std::unique_ptr<SafetensorsReader>> readers_;   // file path -> open reader
  std::map<std::string, Bnb4State> nf4_;                                // 4-bit weight -> its quant_state
};

}  // namespace shardft
