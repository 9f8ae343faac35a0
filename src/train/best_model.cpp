#include "train/best_model.hpp"

#include <cmath>
#include <sstream>

namespace shardft {

BestModelTracker::Verdict BestModelTracker::observe(double value, long step) {
  Verdict v;
  // EarlyStoppingCallback.check_metric_value: against the best before this evaluation, with the threshold.
  const bool improved = !has_best_ || (better(value, best_) && std::fabs(value - best_) > rule_.threshold);
  bad_evaluations_ = improved ? 0 : bad_evaluations_ + 1;
  // Trainer._determine_best_metric: any strict improvement is the new best.
  if (!has_best_ || better(value, best_)) {
    has_best_ = true;
    best_ = value;
    best_step_ = step;
    best_checkpoint_.clear();  // until the checkpoint of this step is saved
    v.new_best = true;
  }
  v.stop = rule_.patience > 0 && bad_evaluations_ >= rule_.patience;
  return v;
}

void BestModelTracker::checkpoint_saved(long step, const std::string& name) {
  if (has_best_ && step == best_step_) best_checkpoint_ = name;
}

std::string BestModelTracker::describe_best() const {
  if (!has_best_) return "none yet";
  std::ostringstream s;
  s << "eval_" << rule_.metric << " " << best_ << " at step " << best_step_;
  if (!best_checkpoint_.empty()) s << " (" << best_checkpoint_ << ")";
  return s.str();
}

std::string BestModelTracker::describe_stop() const {
  std::ostringstream s;
  s << "early stopping: eval_" << rule_.metric << (rule_.greater_is_better ? " did not rise above" : " did not fall below")
    << " the best by more than early_stopping_threshold " << rule_.threshold << " in " << bad_evaluations_
    << " evaluation" << (bad_evaluations_ == 1 ? "" : "s") << " in a row (early_stopping_patience " << rule_.patience
    << "); best " << describe_best();
  return s.str();
}

nlohmann::json BestModelTracker::state() const {
  nlohmann::json s = nlohmann::json::object();
  s["evaluations_without_improvement"] = bad_evaluations_;
  if (has_best_) {
    s["metric"] = "eval_" + rule_.metric;
    s["best_metric"] = best_;
    s["best_step"] = best_step_;
    s["best_model_checkpoint"] = best_checkpoint_;
  }
  return s;
}

void BestModelTracker::restore(const nlohmann::json& s) {
  *this = BestModelTracker(rule_);
  if (!s.is_object()) return;
  bad_evaluations_ = s.value("evaluations_without_improvement", 0);
  // A best judged by another metric (the recipe changed on resume) does not carry over.
  if (!s.contains("best_metric") || s.value("metric", std::string()) != "eval_" + rule_.metric) return;
  has_best_ = true;
  best_ = s.at("best_metric").get<double>();
  best_step_ = s.value("best_step", 0L);
  best_checkpoint_ = s.value("best_model_checkpoint", std::string());
}

}  // namespace shardft
