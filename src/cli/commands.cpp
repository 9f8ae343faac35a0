#include <iomanip>
#include <iostream>

#include "cli/commands.hpp"
#include "config/recipe_schema.hpp"
#include "config/train_config.hpp"
#include "train/run.hpp"

namespace shardft::cli {

Invocation parse_invocation(const std::vector<std::string>& args) {
  Invocation inv;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--config") {
      if (i + 1 >= args.size()) throw ConfigError("--config: expected a recipe path after it");
      inv.config_path = args[++i];
    } else if (a.rfind("--config=", 0) == 0) {
      inv.config_path = a.substr(9);
    } else {
      inv.overrides.push_back(a);
    }
  }
  return inv;
}

namespace {
TrainConfig single_rank_config(const Invocation& inv, const MpiSession& mpi) {
  TrainConfig cfg = load_train_config(inv.config_path, inv.overrides);
  if (mpi.size() != 1) {
    throw ConfigError("this build trains on one rank; launched with " + std::to_string(mpi.size()) +
                      " (data-parallel ZeRO stages are the next milestone)");
  }
  return cfg;
}
}  // namespace

int train(const Invocation& inv, const MpiSession& mpi) {
  const TrainConfig cfg = single_rank_config(inv, mpi);
  const RunSummary s = run_training(cfg, std::cout);
  return s.steps > 0 ? 0 : 1;
}

int eval(const Invocation& inv, const MpiSession& mpi) {
  const TrainConfig cfg = single_rank_config(inv, mpi);
  run_evaluation(cfg, std::cout);
  return 0;
}

int keys(std::ostream& out) {
  const TrainConfig defaults;
  for (const RecipeKey& k : recipe_keys()) {
    TrainConfig copy = defaults;
    out << "  " << std::left << std::setw(30) << k.name << std::setw(28) << value_text(copy, k) << k.doc << "\n";
  }
  return 0;
}

}  // namespace shardft::cli
