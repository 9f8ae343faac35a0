// Evaluation during training: when it is due, the best model and early stopping as HF judges them
// (Trainer._determine_best_metric and EarlyStoppingCallback), the state a checkpoint carries, and the
// val_set_size split of the training samples.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "data/training_set.hpp"
#include "train/best_model.hpp"
#include "config/recipe_sections.hpp"
#include "train/training_eval.hpp"

namespace shardft {
namespace {

BestModelRule loss_rule(int patience, double threshold) {
  BestModelRule r;
  r.patience = patience;
  r.threshold = threshold;
  return r;
}

TEST(BestModel, AStrictImprovementIsTheNewBestAndPatienceCountsTheRest) {
  BestModelTracker t(loss_rule(2, 0.0));
  EXPECT_TRUE(t.observe(3.0, 10).new_best);
  EXPECT_TRUE(t.observe(2.5, 20).new_best);
  const auto equal = t.observe(2.5, 30);  // not strictly better
  EXPECT_FALSE(equal.new_best);
  EXPECT_FALSE(equal.stop);
  EXPECT_EQ(t.evaluations_without_improvement(), 1);
  const auto worse = t.observe(2.7, 40);
  EXPECT_TRUE(worse.stop);
  EXPECT_EQ(t.best_step(), 20);
  EXPECT_DOUBLE_EQ(t.best_value(), 2.5);
  EXPECT_NE(t.describe_stop().find("in 2 evaluations in a row (early_stopping_patience 2); best eval_loss 2.5 at step 20"),
            std::string::npos)
      << t.describe_stop();
}

TEST(BestModel, ASmallImprovementBecomesTheBestButCountsAsNone) {
  // HF: the callback compares with the best before the evaluation, with the threshold; the trainer
  // then takes any strict improvement as the best.
  BestModelTracker t(loss_rule(2, 0.1));
  t.observe(3.0, 10);
  const auto small = t.observe(2.95, 20);
  EXPECT_TRUE(small.new_best);
  EXPECT_EQ(t.evaluations_without_improvement(), 1);
  EXPECT_FALSE(t.observe(2.5, 30).stop);  // 0.45 below the best: counts, the count starts again
  EXPECT_EQ(t.evaluations_without_improvement(), 0);
  EXPECT_TRUE(t.observe(2.45, 40).new_best);
  EXPECT_TRUE(t.observe(2.44, 50).stop);
  EXPECT_EQ(t.best_step(), 50);
}

TEST(BestModel, GreaterIsBetterTurnsTheComparison) {
  BestModelRule r = loss_rule(1, 0.0);
  r.metric = "exact_match";
  r.greater_is_better = true;
  BestModelTracker t(r);
  t.observe(0.2, 5);
  EXPECT_TRUE(t.observe(0.4, 10).new_best);
  EXPECT_TRUE(t.observe(0.3, 15).stop);
  EXPECT_EQ(t.best_step(), 10);
  EXPECT_NE(t.describe_stop().find("eval_exact_match did not rise above"), std::string::npos) << t.describe_stop();
}

TEST(BestModel, TheBestCheckpointIsTheOneSavedAtTheBestStep) {
  BestModelTracker t(loss_rule(0, 0.0));
  t.observe(2.0, 10);
  t.checkpoint_saved(5, "checkpoint-5");  // before the best: not it
  EXPECT_EQ(t.best_checkpoint(), "");
  t.checkpoint_saved(10, "checkpoint-10");
  EXPECT_EQ(t.best_checkpoint(), "checkpoint-10");
  t.observe(1.0, 20);
  EXPECT_EQ(t.best_checkpoint(), "") << "a new best has no checkpoint until its own is saved";
  EXPECT_FALSE(t.observe(1.5, 30).stop) << "patience 0 never stops";
}

TEST(BestModel, StateTravelsThroughACheckpoint) {
  BestModelTracker t(loss_rule(3, 0.0));
  t.observe(2.0, 10);
  t.checkpoint_saved(10, "checkpoint-10");
  t.observe(2.1, 20);
  BestModelTracker resumed(loss_rule(3, 0.0));
  resumed.restore(nlohmann::json::parse(t.state().dump()));
  EXPECT_TRUE(resumed.has_best());
  EXPECT_EQ(resumed.best_step(), 10);
  EXPECT_EQ(resumed.best_checkpoint(), "checkpoint-10");
  EXPECT_EQ(resumed.evaluations_without_improvement(), 1);
  EXPECT_FALSE(resumed.observe(2.2, 30).stop);
  EXPECT_TRUE(resumed.observe(2.3, 40).stop);
  // A best judged by another metric does not carry over; nothing at all (an older checkpoint) is a fresh start.
  BestModelRule em = loss_rule(3, 0.0);
  em.metric = "exact_match";
  BestModelTracker other(em);
  other.restore(t.state());
  EXPECT_FALSE(other.has_best());
  BestModelTracker fresh(loss_rule(3, 0.0));
  fresh.restore(nlohmann::json());
  EXPECT_FALSE(fresh.has_best());
}

TEST(TrainingEvaluator, StepsAndEpochStrategies) {
  ByteTokenizer tok;
  ChatEncoder encoder(tok, chat_template_for(ChatTemplateKind::shardft, tok));
  EvalSet set;
  set.samples.push_back(encoder.encode({{"user", "a"}, {"assistant", "A"}}, 32));
  auto due_steps = [&](TrainConfig cfg, long per_epoch, long total) {
    TrainingEvaluator ev(eval_config(cfg), set, encoder);
    std::vector<long> out;
    for (long s = 1; s <= total; ++s) {
      if (ev.due(s, per_epoch, total)) out.push_back(s);
    }
    return out;
  };
  TrainConfig cfg;
  EXPECT_TRUE(due_steps(cfg, 4, 10).empty());  // no
  cfg.eval_strategy = "steps";
  cfg.eval_steps = 3;
  EXPECT_EQ(due_steps(cfg, 4, 10), (std::vector<long>{3, 6, 9}));  // HF: not at the last step unless due
  cfg.eval_steps = 0;
  cfg.logging_steps = 5;
  EXPECT_EQ(due_steps(cfg, 4, 10), (std::vector<long>{5, 10}));
  cfg.eval_strategy = "epoch";
  EXPECT_EQ(due_steps(cfg, 4, 10), (std::vector<long>{4, 8, 10}));  // each epoch's end and the last
  EXPECT_THROW(TrainingEvaluator(eval_config(cfg), EvalSet{}, encoder), DataError);
}

std::vector<TokenizedSample> numbered(int n) {
  std::vector<TokenizedSample> out(n);
  for (int i = 0; i < n; ++i) out[i].input_ids = {i};
  return out;
}

std::vector<int> ids(const std::vector<TokenizedSample>& s) {
  std::vector<int> out;
  for (const auto& x : s) out.push_back(x.input_ids[0]);
  return out;
}

TEST(ValSetSize, AFractionOrACountDrawnByTheSeedInOriginalOrder) {
  auto train = numbered(100);
  const auto held = split_held_out(train, 0.05, 42);
  EXPECT_EQ(held.size(), 5u);
  EXPECT_EQ(train.size(), 95u);
  std::vector<int> all = ids(train);
  const std::vector<int> h = ids(held);
  EXPECT_TRUE(std::is_sorted(h.begin(), h.end()));
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
  all.insert(all.end(), h.begin(), h.end());
  std::sort(all.begin(), all.end());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(all[i], i);
  EXPECT_NE(h, (std::vector<int>{0, 1, 2, 3, 4})) << "drawn, not the first ones";

  auto again = numbered(100);
  EXPECT_EQ(ids(split_held_out(again, 0.05, 42)), h) << "the same seed holds out the same samples";
  auto other = numbered(100);
  EXPECT_NE(ids(split_held_out(other, 0.05, 7)), h);
  auto ceil = numbered(10);
  EXPECT_EQ(split_held_out(ceil, 0.01, 1).size(), 1u);  // ceil(0.1): datasets' train_test_split rounds up
  auto count = numbered(10);
  EXPECT_EQ(split_held_out(count, 3, 1).size(), 3u);
  auto all_of_it = numbered(10);
  EXPECT_THROW(split_held_out(all_of_it, 10, 1), DataError);
}

TEST(ValSetSize, TheCacheKeepsTheSplit) {
  TrainingSet set;
  set.samples = numbered(6);
  set.held_out = split_held_out(set.samples, 2, 3);
  for (auto* part : {&set.samples, &set.held_out}) {
    for (auto& s : *part) s.labels = s.input_ids;
  }
  const std::string path = ::testing::TempDir() + "/split_cache.h5";
  write_training_set_cache(path, "settings", set);
  TrainingSet back;
  ASSERT_TRUE(read_training_set_cache(path, "settings", back));
  EXPECT_EQ(ids(back.samples), ids(set.samples));
  EXPECT_EQ(ids(back.held_out), ids(set.held_out));
  EXPECT_EQ(back.held_out.size(), 2u);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace shardft
