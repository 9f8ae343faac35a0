#include "train/run_setup.hpp"

#include "data/datasets.hpp"
#include "data/packing.hpp"
#include "kernels/memory_capacity.hpp"
#include "parallel/estimate/memory_estimate.hpp"
#include "train/checkpoint.hpp"
#include "train/mfu.hpp"
#include "train/output_dir_claim.hpp"
#include "config/recipe_sections.hpp"

namespace shardft {

TextPipeline text_pipeline(const std::string& tokenizer_name_or_path, const std::string& chat_template, int vocab_size,
                           std::ostream& log) {
  TextPipeline p;
  p.tokenizer = load_tokenizer(tokenizer_name_or_path);
  if (vocab_size < p.tokenizer->vocab_size()) {
    throw ConfigError("vocab_size " + std::to_string(vocab_size) + " is smaller than the tokenizer's " +
                      std::to_string(p.tokenizer->vocab_size()) + " (" + p.tokenizer->fingerprint() + ")");
  }
  p.encoder = std::make_unique<ChatEncoder>(
      *p.tokenizer, resolve_chat_template(chat_template, tokenizer_name_or_path, *p.tokenizer));
  log << "tokenizer " << p.tokenizer->fingerprint() << " (" << p.tokenizer->vocab_size() << " ids), "
      << p.encoder->describe() << std::endl;
  return p;
}

std::vector<Conversation> eval_subset(const EvalConfig& cfg, const ChatEncoder& encoder, std::ostream& log,
                                      std::vector<LossOn>* losses) {
  DatasetFileReport report;
  auto set = read_dataset(cfg.eval_dataset_path, cfg.options, &report);
  log << describe_skips(report) << std::flush;
  if (cfg.eval_samples > 0 && static_cast<std::size_t>(cfg.eval_samples) < set.size()) set.resize(cfg.eval_samples);
  for (std::size_t i = 0; losses && i < set.size(); ++i) losses->push_back(loss_on(cfg.loss, report.prompt_completion[i]));
  check_eval_targets(set, encoder, cfg.max_seq_length, cfg.eval_dataset_path);
  return set;
}

RunData read_run_data(const TrainConfig& cfg, bool writer, std::ostream& log) {
  RunData d;
  d.text = text_pipeline(cfg.tokenizer_name_or_path, cfg.chat_template, cfg.model.vocab_size, log);
  const ChatEncoder& encoder = *d.text.encoder;
  d.training = training_set_config(cfg);
  d.train_set = build_training_set(d.training, encoder, d.text.tokenizer->fingerprint(), writer, log);
  d.eval = eval_config(cfg);
  std::vector<Conversation> eval_conversations;
  std::vector<LossOn> eval_losses;
  if ((cfg.do_eval || d.eval.evaluates_during_training) && d.eval.val_set_size == 0) {
    eval_conversations = eval_subset(d.eval, encoder, log, &eval_losses);
  }
  d.tokenizer_files = tokenizer_export(
      {cfg.tokenizer_name_or_path, cfg.model_name_or_path, cfg.model.max_position_embeddings}, encoder);
  d.eval_set = make_eval_set(d.eval, encoder, std::move(d.train_set.held_out), std::move(eval_conversations),
                             std::move(eval_losses));
  return d;
}

void report_packing(const TrainingSetConfig& cfg, const TrainingSet& set, std::ostream& log) {
  if (!cfg.packing) return;
  log << "packing: " << set.samples.size() << " samples into " << set.rows.size() << " rows of " << cfg.max_seq_length
      << " tokens (" << 100.0 * packing_efficiency(set.samples, set.rows, cfg.max_seq_length) << "% real tokens, "
      << (cfg.packing_strategy == "bfd" ? "best" : "first") << "-fit decreasing)" << std::endl;
}

MfuBasis mfu_basis(const ModelConfig& model, const PeakFlops& peak, const std::vector<TokenizedSample>& samples, int ranks,
                   std::ostream& log) {
  double mean_sample_tokens = 0;
  for (const auto& smp : samples) mean_sample_tokens += static_cast<double>(smp.input_ids.size());
  mean_sample_tokens /= std::max<double>(1.0, static_cast<double>(samples.size()));
  MfuBasis basis;
  basis.flops_per_token = training_flops_per_token(model, mean_sample_tokens);
  basis.peak_flops = peak.flops;
  basis.ranks = ranks;
  log << "MFU basis: " << basis.flops_per_token << " FLOPs per token (6 x matmul params + attention at "
      << mean_sample_tokens << " tokens per sample), peak " << basis.peak_flops / 1e9 << " GFLOP/s per rank ("
      << peak.basis << ")" << std::endl;
  return basis;
}

RunMetrics open_run_metrics(const RunMetricsConfig& cfg, bool writer, std::ostream& log) {
  RunMetrics metrics = writer ? RunMetrics(cfg) : RunMetrics();
  if (!metrics.tensorboard_dir().empty()) log << "TensorBoard: event files in " << metrics.tensorboard_dir() << std::endl;
  return metrics;
}

void describe_trainer(Trainer& tr, const std::string& model_name_or_path, std::uint64_t seed, int optimizer_overlap_sms,
                      std::ostream& log) {
  for (const std::string& t : tr.ignored_weights()) log << "not loaded: " << t << std::endl;
  log << "attention: " << tr.attention().description << std::endl;
  const std::string overlap = tr.engine().optimizer_overlap_description();
  if (!overlap.empty()) log << "optimizer update: unit by unit under the next step's forward, on " << overlap << std::endl;
  if (overlap.empty() && optimizer_overlap_sms > 0) {
    log << "warning: optimizer_overlap_sms " << optimizer_overlap_sms
        << " has no effect: the optimizer step is not overlapped (optimizer_overlap auto is on only at stage 0 of a "
           "full fine-tune on a GPU)"
        << std::endl;
  }
  if (tr.model().layout().has_frozen() && model_name_or_path.empty()) {
    log << "warning: LoRA without model_name_or_path: the frozen base is randomly initialised (seed "
        << seed << "), so the adapters learn on random weights (fine for benchmarks, not for fine-tuning)"
        << std::endl;
  }
  log << "memory per rank (estimate): " << tr.memory_estimate().describe() << "; budget "
      << (tr.memory_budget().bytes >= 0 ? format_bytes(tr.memory_budget().bytes) + " (" + tr.memory_budget().source + ")"
                                        : tr.memory_budget().source)
      << std::endl;
}

StartPoint start_point(const OutputDirConfig& cfg, Trainer& tr, TrainingEvaluator& evaluator, Communicator& host_world,
                       std::string run_id, std::ostream& log) {
  StartPoint start;
  start.run_id = std::move(run_id);
  if (cfg.resume_from_checkpoint.empty()) return start;
  const ResumePoint rp = resume_checkpoint(cfg, tr, log);
  start.step = rp.state.step;
  start.total_loss = rp.state.train_loss_sum;
  start.run_id = rp.state.run_id;
  evaluator.tracker().restore(rp.state.best_model);
  claim_output_dir(cfg, host_world, log, &start.run_id);  // no other run's checkpoints to collide with
  log << "resumed from " << rp.dir << " at step " << start.step << std::endl;
  return start;
}

void describe_run(const TrainConfig& cfg, const ParallelPlan& parallel, Trainer& tr, const StepPlan& plan,
                  std::size_t num_samples, std::ostream& log) {
  const Communicator& world = parallel.world();
  const int dp = world.size();
  const int shard_size = parallel.shard().size();
  const MemoryReport mem = tr.engine().memory();
  log << "shardft train: " << tr.model().layout().total_numel() << " parameters, " << num_samples << " samples, "
      << compute_dtype_name(compute_dtype(cfg)) << " compute, ZeRO stage " << cfg.zero_stage << " over " << dp << " rank"
      << (dp > 1 ? "s" : "") << " (" << world.backend() << "), shard groups of " << shard_size << ", "
      << dp / shard_size << " replica" << (dp / shard_size > 1 ? "s" : "")
      << (cfg.zero_quantized_weights ? ", qwZ int8 weights" : "") << (cfg.zero_quantized_gradients ? ", qgZ int4 gradients" : "")
      << (cfg.zero_hpz_partition_size > 1 ? ", hpZ groups of " + std::to_string(cfg.zero_hpz_partition_size) : "")
      << "\n"
      << "  global batch " << plan.samples_per_step << " = " << cfg.per_device_train_batch_size
      << " per device x " << cfg.gradient_accumulation_steps << " accumulation x " << dp << " ranks; "
      << plan.total_steps << " steps (" << plan.steps_per_epoch << " per epoch)\n"
      << "  per-rank state: weights " << mem.weights << " B, gradients " << mem.grads << " B, optimizer "
      << mem.optimizer << " B; activations (estimate) "
      << static_cast<std::int64_t>(activation_bytes(cfg.model, cfg.per_device_train_batch_size, cfg.max_seq_length))
      << " B" << std::endl;
}

}  // namespace shardft
