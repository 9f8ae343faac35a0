#pragma once
// `shardft consolidate DIR --merge_adapters`: a PEFT LoRA adapter folder (a LoRA run's checkpoint-N/ or
// output_dir, or any PEFT adapter) merged into its base model, W' = W + scale · B A for every adapted
// weight, written as an HF model directory that transformers loads without PEFT. Streams tensor by
// tensor like consolidate: memory holds the adapter and the largest base tensor.
#include <ostream>
#include <string>

#include "tools/consolidate.hpp"

namespace shardft {

// base_dir: the HF model the adapter was trained on; empty takes adapter_config.json's
// base_model_name_or_path. FormatError naming the file when the adapter does not fit the base.
ConsolidateReport merge_adapters_into_base(const std::string& adapter_dir, const std::string& base_dir,
                                           const ConsolidateOptions& opt, std::ostream& log);

}  // namespace shardft
