#pragma once
// The subcommands. Each parses what main hands it, wires the pieces and reports.
#include <ostream>
#include <string>
#include <vector>

#include "comm/bootstrap.hpp"
#include "config/train_config.hpp"

namespace shardft::cli {

struct Invocation {
  std::string config_path;              // --config
  std::string deepspeed_path;           // --deepspeed ds_config.json
  std::vector<std::string> overrides;   // every other --key=value / --key value
};

// Splits --config PATH and --deepspeed PATH (or =PATH) from the recipe overrides.
Invocation parse_invocation(const std::vector<std::string>& args);

// The recipe, DeepSpeed config and flags as one TrainConfig, `bf16: auto` decided for this device.
TrainConfig load_recipe(const Invocation& inv);

int train(const Invocation& inv, const MpiSession& mpi);
int eval(const Invocation& inv, const MpiSession& mpi);
int generate(const std::vector<std::string>& args, const MpiSession& mpi);
int estimate(const std::vector<std::string>& args, std::ostream& out);
int consolidate(const std::vector<std::string>& args, std::ostream& out);
int inspect(const std::vector<std::string>& args, std::ostream& out);
int plot(const std::vector<std::string>& args, std::ostream& out);

}  // namespace shardft::cli
