#pragma once
// bitsandbytes' 4-bit weights as transformers saves a load_in_4bit model (Linear4bit._save_to_state_dict
// writes the weight, then QuantState.as_dict(packed=True) under "<weight>."): a quantized X.weight of n
// values is U8 [ceil(n/2), 1] packed NF4 indices, with its companions
//   X.weight.absmax                          U8  [B]     8-bit absmax (double quantization), B = ceil(n/64)
//   X.weight.quant_map                       F32 [16]    the NF4 code book
//   X.weight.nested_absmax                   F32 [B2]    per-256 scales of the absmax, B2 = ceil(B/256)
//   X.weight.nested_quant_map                F32 [256]   the signed dynamic map
//   X.weight.quant_state.bitsandbytes__nf4   U8          JSON: quant_type, blocksize, dtype, shape,
//                                                        nested_blocksize, nested_dtype, nested_offset
// That is kernels/nf4_quantize's format byte for byte, so the bytes are used as they are. Only what
// shardft computes is accepted: nf4 (not fp4), blocksize 64, double quantization with block 256.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.hpp"
#include "kernels/nf4_quantize.hpp"

namespace shardft {

struct Bnb4State {  // a quant_state's non-tensor items
  std::vector<std::int64_t> shape;
  std::int64_t numel = 0;
  float offset = 0.f;  // nested_offset: the mean of the first-level absmax
  std::string dtype;   // the dtype the weight was quantized from
};

// The file holding a tensor, opened (HfModelWeights::reader_for).
using TensorFileLookup = std::function<SafetensorsReader&(const std::string& tensor)>;

// "X.weight" for any of X.weight's companions, "" for any other name.
std::string bnb4_weight_of(const std::string& tensor);

// Every 4-bit weight among `names`, keyed by its name, after checking it completely: every companion
// present with the dtype and size above, quant_map NF4's values and nested_quant_map the dynamic map,
// the quant_state nf4 / 64 / 256 with a shape whose size matches. Throws FormatError naming `where`
// (the checkpoint), the tensor and what was expected; a U8 tensor that is neither a weight with a
// quant_state nor a companion is an error too (a companion missing, or not a 4-bit checkpoint).
std::map<std::string, Bnb4State> find_bnb4_weights(const std::vector<std::string>& names,
                                                   const TensorFileLookup& file_of, const std::string& where);

// One checked weight's bytes as they are stored, in MemSpace.
Nf4Tensor read_bnb4_weight(const std::string& weight, const Bnb4State& state, const TensorFileLookup& file_of);

}  // namespace shardft
