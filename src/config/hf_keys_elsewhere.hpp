#pragma once
// Keys of HF's TrainingArguments / trl's SFTConfig / accelerate that a user brings over and shardft has no
// key for: instead of a typo guess ("did you mean 'logging_steps'?" for logging_strategy), what shardft does
// instead or what to use.
#include <string>

namespace shardft {

// What to do about `name` where it is such a key; "" where it is not one.
std::string hf_key_elsewhere(const std::string& name);

}  // namespace shardft
