#include "train/checkpointer.hpp"

namespace shardft {

Checkpointer::Checkpointer(CheckpointConfig cfg, Trainer& tr, TrainingEvaluator& evaluator,
                           const TokenizerExport& tokenizer, const StepPlan& plan, std::string run_id)
    : cfg_(std::move(cfg)), tr_(tr), evaluator_(evaluator), tokenizer_(tokenizer), plan_(plan), run_id_(std::move(run_id)) {}

bool Checkpointer::due(long step, const BestModelTracker::Verdict& judged, bool preempted) const {
  // A preempted run saves whatever the strategy: its checkpoint is the only way on.
  return checkpoint_due(cfg_.schedule, step, plan_.steps_per_epoch, judged.stop ? step : plan_.total_steps) ||
         preempted || (cfg_.schedule.save_strategy == "best" && judged.new_best);
}

void Checkpointer::after_step(long step, const BestModelTracker::Verdict& judged, bool preempted, double total_loss,
                              std::ostream& log, ProgressBar* bar) {
  if (!due(step, judged, preempted)) return;
  if (bar) bar->clear();
  const std::string dir = save_checkpoint(cfg_, tr_, state(step, total_loss), &log, &tokenizer_);
  log << "saved " << dir << std::endl;
}

CheckpointState Checkpointer::state(long step, double total_loss) {
  CheckpointState state{step, total_loss, run_id_};
  if (!evaluator_.judges_best()) return state;
  BestModelTracker& best = evaluator_.tracker();
  best.checkpoint_saved(step, "checkpoint-" + std::to_string(step));
  state.best_model = best.state();
  state.keep_checkpoint = best.best_checkpoint();
  return state;
}

}  // namespace shardft
