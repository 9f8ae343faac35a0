#include "train/output_path.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "config/train_config.hpp"

namespace shardft {

void create_output_dir(const std::string& path, const std::string& key) {
  namespace fs = std::filesystem;
  if (path.empty()) throw ConfigError(key + ": empty path");
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec && !fs::is_directory(path)) throw ConfigError(key + ": cannot create '" + path + "': " + ec.message());
  if (!fs::is_directory(path, ec)) throw ConfigError(key + ": '" + path + "' is not a directory");
  // access() answers for this process's user (root passes it whatever the mode bits say, as it writes).
  if (::access(path.c_str(), W_OK | X_OK) != 0) {
    throw ConfigError(key + ": '" + path + "' is not writable: " + std::strerror(errno));
  }
}

}  // namespace shardft
