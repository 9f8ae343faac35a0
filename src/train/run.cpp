#include "train/run.hpp"

#include <chrono>
#include <filesystem>
#include <memory>

#include "data/batch_source.hpp"
#include "kernels/kernel_timer.hpp"
#include "io/progress_bar.hpp"
#include "infer/attention_choice.hpp"
#include "infer/chat_model.hpp"
#include "train/checkpoint.hpp"
#include "train/checkpointer.hpp"
#include "infer/checkpoint_read.hpp"
#include "train/output_dir_claim.hpp"
#include "train/output_lock.hpp"
#include "infer/pretrained.hpp"
#include "config/recipe_sections.hpp"
#include "train/run_end.hpp"
#include "train/run_metrics.hpp"
#include "train/run_setup.hpp"
#include "train/step_logger.hpp"
#include "train/stop_check.hpp"
#include "train/stop_signal.hpp"
#include "infer/hf_export.hpp"
#include "infer/model_export.hpp"
#include "train/trainer.hpp"
#include "train/training_eval.hpp"
#include "train/training_step.hpp"

namespace shardft {

RunSummary run_training(const TrainConfig& cfg, Communicator& world, std::ostream& log) {
  return run_training(cfg, ParallelPlan::over(world), log);
}

RunSummary run_training(const TrainConfig& cfg, const ParallelPlan& parallel, std::ostream& log_stream) {
  const auto t_start = std::chrono::steady_clock::now();
  Communicator& world = parallel.world();
  const bool writer = world.rank() == 0;
  install_stop_signal_handlers();  // from here a signal stops the run after its first step, with a checkpoint
  std::ostream null_stream(nullptr);
  std::ostream& log = writer ? log_stream : null_stream;
  for (const std::string& w : ineffective_keys(cfg)) log << "warning: " << w << std::endl;
  // The export's dtype now: a source config naming one it cannot write stops the run before training.
  const TensorDtype export_dtype = resolve_export_dtype(cfg.export_dtype, read_source_config(cfg.model_name_or_path));
  log << "final model: " << export_dtype_name(export_dtype) << " (export_dtype " << cfg.export_dtype
      << "), one file up to max_shard_size " << cfg.max_shard_size << ", shards past it" << std::endl;
  RunData data = read_run_data(cfg, writer, log);
  const ChatEncoder& encoder = *data.text.encoder;
  TrainingEvaluator evaluator(data.eval, std::move(data.eval_set), encoder);
  const TrainingSet& train_set = data.train_set;
  report_packing(data.training, train_set, log);
  const MfuBasis mfu = mfu_basis(cfg.model, resolve_peak_flops(cfg.peak_tflops, cfg.bf16 || cfg.fp16, cfg.bf16), train_set.samples,
                                 world.size(), log);
  const SamplerConfig sampling = sampler_section(cfg);
  const StepPlan plan =
      plan_steps(sampling, BatchSource::num_units(sampling, train_set.samples, train_set.rows), world.size());
  // Collective: one run per output_dir (train/output_lock.hpp), taken before anything in it is written.
  const OutputLock output_lock = OutputLock::acquire(cfg.output_dir, parallel.host_world(), log);
  // ... and over time: a fresh run does not start among an earlier run's checkpoints (train/output_dir_claim.hpp).
  const OutputDirConfig output{cfg.output_dir, cfg.overwrite_output_dir, cfg.resume_from_checkpoint};
  if (cfg.resume_from_checkpoint.empty()) claim_output_dir(output, parallel.host_world(), log);
  std::string run_id = cfg.resume_from_checkpoint.empty() ? new_run_id(parallel.host_world()) : "";
  RunMetrics metrics = open_run_metrics(
      {cfg.output_dir, cfg.report_to, cfg.logging_dir, cfg.run_name, !cfg.resume_from_checkpoint.empty()}, writer, log);
  Trainer tr(cfg, plan.total_steps, parallel);
  describe_trainer(tr, cfg.model_name_or_path, cfg.seed, cfg.optimizer_overlap_sms, log);
  const StartPoint start = start_point(output, tr, evaluator, parallel.host_world(), std::move(run_id), log);
  describe_run(cfg, parallel, tr, plan, train_set.samples.size(), log);

  // Rank 0 on a terminal: a progress line on stderr, cleared before each log line and drawn again after.
  const auto bar =
      writer && !cfg.disable_tqdm ? terminal_progress_bar("train", plan.total_steps, "steps", start.step) : nullptr;
  BatchSource batches(sampling, train_set.samples, train_set.rows, plan, world.rank(), world.size(), encoder.pad_id());
  TrainingStep step(tr, batches, start.step, world.rank(), cfg.log_level == "debug", cfg.adapter_path);
  StepLogger logger(cfg.logging_steps, cfg.logging_first_step, plan, mfu, start.total_loss,
                    cfg.fp16 ? &tr.loss_scaler() : nullptr);
  Checkpointer checkpointer(checkpoint_config(cfg), tr, evaluator, data.tokenizer_files, plan, start.run_id);
  StopCheck stop(parallel.host_world());
  long last_step = plan.total_steps;  // sooner where early stopping ends the run
  if (cfg.eval_on_start) evaluator.evaluate(tr, start.step, epoch_at(start.step, plan), false, log, metrics);
  for (long s = start.step; s < last_step; ++s) {
    const StepStats st = step.run(s, log, bar.get());
    logger.after_step(s + 1, st, log, metrics, bar.get());
    BestModelTracker::Verdict judged;
    if (evaluator.due(s + 1, plan.steps_per_epoch, plan.total_steps)) {
      if (bar) bar->clear();
      judged = evaluator.evaluate(tr, s + 1, epoch_at(s + 1, plan), true, log, metrics);
    }
    const bool preempted = stop.after_step(s + 1, log, bar.get());
    checkpointer.after_step(s + 1, judged, preempted, logger.total_loss(), log, bar.get());
    if (preempted) {
      stop.report_stopped(s + 1, log);
      return finish_preempted(s + 1, parallel);
    }
    if (judged.stop) {
      if (bar) bar->clear();
      log << evaluator.tracker().describe_stop() << "; stopped after step " << s + 1 << " of " << plan.total_steps
          << std::endl;
      last_step = s + 1;
    }
    if (bar) bar->update(s + 1, {{"loss", format_stat(st.loss)}, {"tok/s", format_si(logger.tokens_per_second())}});
  }
  if (bar) bar->finish();
  pause_kernel_timer();  // SHARDFT_KERNEL_TIMES reports the steps, not the export after them
  return finish_training({cfg, parallel, tr, evaluator, encoder, data.tokenizer_files, metrics, plan, t_start,
                          last_step, logger.total_loss(), &step.last_kernels(), step.last_kernels_step()},
                         log);
}

namespace {
EvalResult evaluate_and_report(Decoder& model, LocalParams& params, const std::vector<Conversation>& eval_set,
                               const std::vector<LossOn>& losses, const EvalConfig& cfg, const ChatEncoder& encoder,
                               std::ostream& log) {
  const EvalResult ev = evaluate(model, params, eval_set, cfg.per_device_eval_batch_size, cfg.max_seq_length,
                                 cfg.eval_max_new_tokens, encoder, losses);
  report_eval(ev, log);
  int shown = 0;
  for (std::size_t i = 0; i < eval_set.size() && shown < 3; ++i) {
    if (!ChatEncoder::can_generate(eval_set[i])) continue;
    log << "  example: " << eval_set[i].back().content << " <- generated: " << ev.generations[i] << std::endl;
    ++shown;
  }
  return ev;
}
}  // namespace

EvalResult run_evaluation(const TrainConfig& cfg, Communicator& world, std::ostream& log_stream) {
  std::ostream null_stream(nullptr);
  std::ostream& log = world.rank() == 0 ? log_stream : null_stream;
  std::error_code ec;
  if (std::filesystem::exists(cfg.output_dir + "/metadata.json", ec) &&
      std::filesystem::exists(cfg.output_dir + "/adapter_config.json", ec)) {
    // A LoRA checkpoint holds the adapter, not its base: evaluated as generate opens it, the base (from
    // adapter_config.json) with the verified adapter merged, tokenizer and template from the run.
    ChatModel cm = open_chat_model(cfg.output_dir, "output_dir", cfg, log);
    std::vector<LossOn> losses;
    const EvalConfig eval = eval_config(cm.cfg);
    const std::vector<Conversation> eval_set = eval_subset(eval, *cm.encoder, log, &losses);
    return evaluate_and_report(*cm.model, *cm.params, eval_set, losses, eval, *cm.encoder, log);
  }
  const TextPipeline text = text_pipeline(cfg.tokenizer_name_or_path, cfg.chat_template, cfg.model.vocab_size, log);
  std::vector<LossOn> losses;
  const EvalConfig eval = eval_config(cfg);
  const std::vector<Conversation> eval_set = eval_subset(eval, *text.encoder, log, &losses);
  Decoder model(cfg.model, compute_dtype(cfg));
  model.set_logits_chunk_tokens(cfg.logits_chunk_tokens);
  configure_attention(model, cfg.attn_implementation);
  LocalParams params(model.layout());
  {  // output_dir is an HF directory (model.safetensors, or a sharded set with its index) or a checkpoint-N
    auto host = Kokkos::create_mirror_view(params.weights());
    if (std::filesystem::exists(cfg.output_dir + "/metadata.json", ec)) {
      read_checkpoint_weights(cfg.output_dir, model.layout(), host.data(), log);  // every rank verifies
    } else {
      read_pretrained_weights(model.layout(), cfg.output_dir, host.data());
    }
    Kokkos::deep_copy(params.weights(), host);
  }
  round_to_compute_dtype(compute_dtype(cfg), params.weights());
  return evaluate_and_report(model, params, eval_set, losses, eval, *text.encoder, log);
}

}  // namespace shardft
