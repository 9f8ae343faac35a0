#pragma once
// rope_scaling as JSON: read from config.json (or a checkpoint's model metadata) and written back.
#include <string>

#include <nlohmann/json.hpp>

#include "config/rope_scaling.hpp"

namespace shardft {

// Reads a rope_scaling block (null: plain RoPE). Throws ConfigError "<where>rope_scaling.<key>: <why>"
// for a type other than default / linear / dynamic / yarn / llama3, a missing or invalid field, or a key
// the type does not take (transformers would ignore it with a warning; here it would be silently wrong).
RopeScaling parse_rope_scaling(const nlohmann::json& block, const std::string& where);

// The block parse_rope_scaling reads back to the same RopeScaling; null for plain RoPE.
nlohmann::json rope_scaling_json(const RopeScaling& s);

}  // namespace shardft
