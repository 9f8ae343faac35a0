// save_strategy (HF's key): when a run writes a checkpoint.
#include <gtest/gtest.h>

#include <vector>

#include "train/checkpoint.hpp"

namespace shardft {
namespace {

std::vector<long> due_steps(const SaveSchedule& cfg, long per_epoch, long total) {
  std::vector<long> out;
  for (long s = 1; s <= total; ++s) {
    if (checkpoint_due(cfg, s, per_epoch, total)) out.push_back(s);
  }
  return out;
}

TEST(CheckpointDue, StepsSavesEverySaveStepsAndTheLast) {
  SaveSchedule cfg;
  cfg.save_steps = 4;
  EXPECT_EQ(due_steps(cfg, 5, 10), (std::vector<long>{4, 8, 10}));
  cfg.save_steps = 0;
  EXPECT_EQ(due_steps(cfg, 5, 10), (std::vector<long>{10}));
}

TEST(CheckpointDue, EpochSavesAtEachEpochsEndAndTheLast) {
  SaveSchedule cfg;
  cfg.save_strategy = "epoch";
  cfg.save_steps = 4;  // not used by this strategy
  EXPECT_EQ(due_steps(cfg, 3, 8), (std::vector<long>{3, 6, 8}));
}

TEST(CheckpointDue, NoNeverSaves) {
  SaveSchedule cfg;
  cfg.save_strategy = "no";
  cfg.save_steps = 2;
  EXPECT_TRUE(due_steps(cfg, 3, 8).empty());
}

TEST(CheckpointDue, AnUnknownStrategyIsRefusedNamingTheKey) {
  try {
    load_train_config("", {"--save_strategy", "best"});
    FAIL() << "save_strategy best was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("save_strategy"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("epoch"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace shardft
