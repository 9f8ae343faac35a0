#pragma once
#include <stdexcept>

namespace shardft {

// A recipe that cannot be used. The message names the file:line or the key and what was expected.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace shardft
