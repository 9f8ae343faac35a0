#pragma once
// A PEFT LoRA adapter merged into weights held in memory, W' = W + scale B A (generation with an
// adapter), and the check every merge makes of what it wrote.
#include <cstdint>
#include <ostream>
#include <string>

#include "model/param_layout.hpp"

namespace shardft {

// The PEFT adapter at `adapter_dir` merged into `weights` (the flat host weights of `layout`, a model
// without LoRA parameters): generation with an adapter. FormatError when it does not fit the layout.
void merge_adapter_into_weights(const std::string& adapter_dir, const ParamLayout& layout, float* weights,
                                std::ostream& log);

// FormatError naming the tensor and adapter when the merged weight `w` (n values) holds a non-finite
// value: finite values with a huge lora_alpha can still overflow W + scale B A, and such a weight must
// not be written or generated with.
void check_merged_weight(const float* w, std::int64_t n, const std::string& name, const std::string& adapter_dir,
                         double scale);

}  // namespace shardft
