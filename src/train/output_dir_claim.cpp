#include "train/output_dir_claim.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <vector>

#include "config/config_error.hpp"
#include "io/checkpoint_meta.hpp"
#include "comm/collective_error.hpp"

namespace shardft {

namespace fs = std::filesystem;

namespace {

// What another run left in `dir`: for a fresh run (`resumed` null) its checkpoints (interrupted saves
// too), `latest` and metrics.jsonl; for a resumed run, checkpoints whose metadata names another run
// (ones that do not read are left to the resume, which skips damaged checkpoints).
std::vector<std::string> earlier_run_files(const std::string& dir, const std::string* resumed) {
  std::vector<std::string> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    const bool checkpoint = n.rfind("checkpoint-", 0) == 0 && e.is_directory(ec);
    if (!resumed) {
      if (checkpoint || n == "latest" || n == "metrics.jsonl") found.push_back(n);
      continue;
    }
    if (!checkpoint || n.find(".tmp") != std::string::npos) continue;
    try {
      if (read_checkpoint_meta(e.path().string()).json.value("run_id", std::string()) != *resumed) found.push_back(n);
    } catch (const std::exception&) {
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string listing(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < 6; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 6) out += " and " + std::to_string(names.size() - 6) + " more";
  return out;
}

}  // namespace

void claim_output_dir(const OutputDirConfig& cfg, Communicator& world, std::ostream& log, const std::string* resumed_run_id) {
  std::string err;
  if (world.rank() == 0) {
    try {
      const std::vector<std::string> found = earlier_run_files(cfg.output_dir, resumed_run_id);
      if (!found.empty() && !cfg.overwrite_output_dir) {
        err = resumed_run_id
                  ? "output_dir '" + cfg.output_dir + "' holds checkpoints of another run (" + listing(found) +
                        "), whose step numbers the resumed run's would collide with: resume into another output_dir, "
                        "or set overwrite_output_dir: true to remove them first"
                  : "output_dir '" + cfg.output_dir + "' holds an earlier run (" + listing(found) +
                        "): resume it with resume_from_checkpoint: true, choose another output_dir, or set "
                        "overwrite_output_dir: true to remove them first";
      }
      if (!found.empty() && cfg.overwrite_output_dir) {
        for (const std::string& n : found) fs::remove_all(fs::path(cfg.output_dir) / n);
        log << "overwrite_output_dir: removed " << listing(found) << " from " << cfg.output_dir << std::endl;
      }
    } catch (const std::exception& e) {
      err = "output_dir '" + cfg.output_dir + "': " + e.what();
    }
  }
  err = broadcast_text(world, err, 0);
  if (!err.empty()) throw ConfigError(err);
}

std::string new_run_id(Communicator& world) {
  std::string id;
  if (world.rank() == 0) {
    std::random_device device;
    std::seed_seq seed{device(), device(), static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count())};
    std::mt19937_64 draw(seed);
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(draw()));
    id = buf;
  }
  return broadcast_text(world, id, 0);
}

}  // namespace shardft
