#include "train/training_eval.hpp"

#include <chrono>

#include "train/evaluate.hpp"

namespace shardft {

TrainingEvaluator::TrainingEvaluator(EvalConfig cfg, EvalSet set, const ChatEncoder& encoder)
    : cfg_(std::move(cfg)), set_(std::move(set)), encoder_(encoder), tracker_(cfg_.best_model) {
  if (set_.samples.empty() && cfg_.evaluates_during_training) {
    throw DataError((cfg_.val_set_size > 0 ? std::string("val_set_size") : cfg_.eval_dataset_path) +
                    ": the eval set is empty, so eval_strategy " + cfg_.eval_strategy + " has nothing to evaluate");
  }
}

EvalSet make_eval_set(const EvalConfig& cfg, const ChatEncoder& encoder, std::vector<TokenizedSample> held_out,
                      std::vector<Conversation> conversations, std::vector<LossOn> loss_on) {
  EvalSet set;
  set.conversations = std::move(conversations);
  set.loss_on = std::move(loss_on);
  if (cfg.val_set_size > 0) {
    set.samples = std::move(held_out);
    if (cfg.eval_samples > 0 && static_cast<std::size_t>(cfg.eval_samples) < set.samples.size()) {
      set.samples.resize(static_cast<std::size_t>(cfg.eval_samples));
    }
  } else if (cfg.evaluates_during_training) {
    for (std::size_t i = 0; i < set.conversations.size(); ++i) {
      const LossOn on = i < set.loss_on.size() ? set.loss_on[i] : LossOn::assistant;
      set.samples.push_back(encoder.encode(set.conversations[i], cfg.max_seq_length, on));
    }
  }
  return set;
}

bool TrainingEvaluator::due(long step, long steps_per_epoch, long total_steps) const {
  if (cfg_.eval_strategy == "steps") return step % cfg_.eval_interval_steps == 0;
  if (cfg_.eval_strategy == "epoch") return step == total_steps || (steps_per_epoch > 0 && step % steps_per_epoch == 0);
  return false;
}

BestModelTracker::Verdict TrainingEvaluator::evaluate(Trainer& tr, long step, double epoch, bool judged,
                                                      std::ostream& log, RunMetrics& metrics) {
  const auto start = std::chrono::steady_clock::now();
  nlohmann::json record{{"step", step}, {"epoch", epoch}};
  std::vector<std::pair<std::string, double>> line;
  if (cfg_.eval_generate) {
    // Generation as at the end, on every rank (stage 3's gathers are collective); its loss is the same sum.
    const EvalResult ev = shardft::evaluate(tr.model(), tr.engine(), set_.conversations, cfg_.per_device_eval_batch_size,
                                            cfg_.max_seq_length, cfg_.eval_max_new_tokens, encoder_, set_.loss_on);
    record["eval_loss"] = ev.eval_loss;
    record["eval_exact_match"] = ev.exact_match;
    line = {{"eval_loss", ev.eval_loss}, {"eval_exact_match", ev.exact_match}};
  } else {
    const LossEval ev = evaluate_loss(tr.model(), tr.engine(), set_.samples, cfg_.per_device_eval_batch_size,
                                      encoder_.pad_id(), tr.plan().host_world());
    record["eval_loss"] = ev.eval_loss;
    line = {{"eval_loss", ev.eval_loss}};
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double samples = static_cast<double>(set_.samples.size());
  record["eval_runtime"] = seconds;
  record["eval_samples"] = set_.samples.size();
  record["eval_samples_per_second"] = seconds > 0 ? samples / seconds : 0.0;
  line.insert(line.end(), {{"eval_runtime", seconds},
                           {"eval_samples_per_second", seconds > 0 ? samples / seconds : 0.0},
                           {"epoch", epoch},
                           {"step", static_cast<double>(step)}});
  log << python_dict_line(line) << std::endl;
  metrics.add(record, step);
  if (!judged) return {};
  const BestModelTracker::Verdict verdict = tracker_.observe(record.at("eval_" + tracker_.rule().metric), step);
  if (verdict.new_best && judges_best()) {
    log << "new best: " << tracker_.describe_best() << std::endl;
  }
  return verdict;
}

}  // namespace shardft
