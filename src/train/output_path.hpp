#pragma once
// Output directories named by a key (output_dir, consolidate's --output, plot's --output): a problem
// with one is the user's to fix, so it is a ConfigError (exit 2) naming the key and the path, not a
// bare `filesystem error:` from the library.
#include <string>

namespace shardft {

// Creates `path` and its parents if needed and checks that it is a writable directory.
// ConfigError "KEY: cannot create 'PATH': REASON" / "KEY: 'PATH' is not a directory" / "... is not writable".
void create_output_dir(const std::string& path, const std::string& key);

}  // namespace shardft
