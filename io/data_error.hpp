#pragma once
// Malformed input a user handed over (a dataset, a chat template, a tokenizer file): the message names
// the file and line or key and what was expected. The CLI reports it and exits 2. Every layer that
// reads such input throws it, so it lives with the file formats, below them all.
#include <stdexcept>

namespace shardft {

class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace shardft
