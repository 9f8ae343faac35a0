#include "train/run_end.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "config/recipe_sections.hpp"
#include "io/safetensors.hpp"
#include "kernels/device_traffic.hpp"
#include "kernels/memory_capacity.hpp"
#include "train/checkpoint.hpp"
#include "infer/model_export.hpp"
#include "infer/hf_export.hpp"
#include "train/process_memory.hpp"
#include "train/step_kernels_report.hpp"

namespace shardft {

namespace {

// Test hook: SHARDFT_FAULT="RANK:end:stop" stops that rank (SIGSTOP, as a hung process) once the run's
// last collective is behind it, before the end-of-run barrier.
void maybe_stop_at_end(int rank) {
  const char* spec = std::getenv("SHARDFT_FAULT");
  int fault_rank = -1;
  if (spec && std::sscanf(spec, "%d:end:stop", &fault_rank) == 1 && fault_rank == rank) std::raise(SIGSTOP);
}

// Every rank reaches the end of the run, or the others learn it within collective_timeout_s (the timed
// barrier reports the wait and aborts the job) instead of waiting in MPI_Finalize forever.
void end_of_run_barrier(const ParallelPlan& parallel) {
  maybe_stop_at_end(parallel.world().rank());
  parallel.world().barrier();
}

// load_best_model_at_end: the trainer's weights become the best checkpoint's before the export (collective).
void load_best_model(const std::string& output_dir, Trainer& tr, const BestModelTracker& best, long last_step,
                     std::ostream& log) {
  if (!best.has_best()) {
    log << "load_best_model_at_end: no evaluation was judged, so the model is the last step's" << std::endl;
  } else if (best.best_step() == last_step) {
    log << "load_best_model_at_end: the last step is the best (" << best.describe_best() << ")" << std::endl;
  } else if (best.best_checkpoint().empty()) {
    // Validation makes a checkpoint at every evaluation; only a resume from another recipe gets here.
    log << "warning: load_best_model_at_end: no checkpoint was saved at the best evaluation (" << best.describe_best()
        << "), so the model is the last step's" << std::endl;
  } else {
    load_checkpoint(output_dir + "/" + best.best_checkpoint(), tr, log);
    log << "load_best_model_at_end: the model is " << best.best_checkpoint() << "'s, the best: " << best.describe_best()
        << std::endl;
  }
}

// The closing record's fields on the best model (HF's trainer_state.json names).
nlohmann::json best_model_fields(const BestModelTracker& best, bool stopped_early) {
  nlohmann::json f{{"stopped_early", stopped_early}};
  if (!best.has_best()) return f;
  f["best_metric"] = best.best_value();
  f["best_step"] = best.best_step();
  if (!best.best_checkpoint().empty()) f["best_model_checkpoint"] = best.best_checkpoint();
  return f;
}

// do_eval at the end: generation and exact match over the eval conversations as before (every rank the
// same set: stage 3's gathers are collective), or the loss alone over a val_set_size split.
EvalResult final_evaluation(const EvalConfig& cfg, Trainer& tr, const EvalSet& set, const ChatEncoder& encoder) {
  if (cfg.val_set_size == 0) {
    return evaluate(tr.model(), tr.engine(), set.conversations, cfg.per_device_eval_batch_size, cfg.max_seq_length,
                    cfg.eval_max_new_tokens, encoder, set.loss_on);
  }
  const LossEval loss = evaluate_loss(tr.model(), tr.engine(), set.samples, cfg.per_device_eval_batch_size,
                                      encoder.pad_id(), tr.plan().host_world());
  EvalResult ev;
  ev.eval_loss = loss.eval_loss;
  ev.samples = loss.samples;
  return ev;
}

// HF's summary of the run (its line on `log`): train_loss over the whole run, resumed or not.
RunSummary summarize(const FinishedRun& r, std::ostream& log) {
  RunSummary sum;
  sum.steps = r.last_step;
  sum.train_runtime = std::chrono::duration<double>(std::chrono::steady_clock::now() - r.start).count();
  sum.train_samples_per_second = static_cast<double>(r.last_step * r.plan.samples_per_step) / sum.train_runtime;
  sum.train_steps_per_second = static_cast<double>(r.last_step) / sum.train_runtime;
  sum.train_loss = r.total_loss / static_cast<double>(r.last_step);
  log << python_dict_line({{"train_runtime", sum.train_runtime}, {"train_samples_per_second", sum.train_samples_per_second},
                  {"train_steps_per_second", sum.train_steps_per_second}, {"train_loss", sum.train_loss},
                  {"epoch", epoch_at(r.last_step, r.plan)}})
      << std::endl;
  return sum;
}

// fp16's skipped steps, the last step's device work, and memory: measured, held, estimated.
void report_resources(const FinishedRun& r, std::ostream& log) {
  if (r.cfg.fp16) {
    log << "fp16: " << r.tr.loss_scaler().skipped_steps() << " of " << r.last_step
        << " steps skipped on gradient overflow; final loss scale " << r.tr.loss_scaler().scale() << std::endl;
  }
  log << describe_step_kernels(*r.kernels, r.cfg.model.num_hidden_layers, r.kernels_step) << std::endl;
  const MemoryReport after = r.tr.engine().memory();
  log << "peak memory per rank: " << peak_rss_bytes() << " B measured (process RSS); model state "
      << after.weights + after.grads + after.optimizer << " B (weights " << after.weights << " B of which frozen "
      << after.frozen_weights << " B, gradients " << after.grads << " B, optimizer " << after.optimizer
      << " B) + transient gathers " << after.peak_gathered << " B (of which NF4 " << after.peak_nf4_transient
      << " B) + gradient units " << after.peak_unit_grads << " B (buffers kept for reuse at the end: " << after.pooled
      << " B)" << std::endl;
  // The capacity now beside the peak: on a GPU, what the process holds outside Kokkos' allocations
  // (the CUDA context, cuBLAS / cuDNN workspaces, NCCL's buffers) is the rest of what nvidia-smi shows.
  log << "device memory at its peak: " << describe_device_peak() << "; estimated at start: "
      << static_cast<std::int64_t>(r.tr.memory_estimate().total()) << " B; now " << compute_memory_capacity().source
      << std::endl;
}

// Collective: the final model (the best checkpoint's with load_best_model_at_end) as an HF directory in
// output_dir: transformers and `--model_name_or_path` both load it.
void export_model(const FinishedRun& r, std::ostream& log) {
  const bool writer = r.parallel.world().rank() == 0;
  if (r.cfg.load_best_model_at_end) load_best_model(r.cfg.output_dir, r.tr, r.evaluator.tracker(), r.last_step, log);
  const ModelExportConfig cfg = model_export_config(r.cfg);
  const nlohmann::json source = read_source_config(cfg.model_name_or_path);
  const TensorDtype dtype = resolve_export_dtype(cfg.export_dtype, source);
  const SafetensorsShardsReport rep = save_model(r.tr.engine(), r.tr.model().layout(), cfg, dtype, writer);
  if (!writer) return;
  write_hf_config(cfg.output_dir, model_meta_json(r.cfg.model), source, dtype);
  write_tokenizer_export(r.tokenizer_files, cfg.output_dir);
  log << "saved the model to " << cfg.output_dir << " in " << export_dtype_name(dtype)
      << (cfg.export_dtype == "auto" ? (source.is_object() ? " (export_dtype auto: model_name_or_path's dtype)"
                                                            : " (export_dtype auto: a model defined here)")
                                     : "")
      << ": " << (rep.files == 1 ? std::string("model.safetensors")
                                 : std::to_string(rep.files) + " shards with model.safetensors.index.json")
      << " (" << rep.bytes << " B), config.json, generation_config.json"
      << (r.tokenizer_files.tokenizer_config.is_null() ? "" : " and the tokenizer with its chat template")
      << (r.tr.model().layout().has_frozen() ? "; the LoRA adapter beside it" : "") << std::endl;
  for (const std::string& f : rep.removed) log << "removed " << f << ", an earlier export's weight file" << std::endl;
}

// metrics.jsonl's closing record, but for do_eval's fields. device_peak: the training's, before the export.
nlohmann::json closing_record(const FinishedRun& r, const RunSummary& sum, std::int64_t device_peak) {
  nlohmann::json record{{"train_runtime", sum.train_runtime},
                        {"train_samples_per_second", sum.train_samples_per_second},
                        {"train_steps_per_second", sum.train_steps_per_second},
                        {"train_loss", sum.train_loss},
                        {"global_step", r.last_step},
                        {"world_size", r.parallel.world().size()},
                        {"zero_stage", r.cfg.zero_stage},
                        {"peak_memory_bytes", peak_rss_bytes()}};
  record["device_peak_memory_bytes"] = device_peak;  // Kokkos allocations (vendor workspaces not counted)
  record.update(step_kernel_fields(*r.kernels, r.cfg.model.num_hidden_layers));
  if (r.cfg.fp16) {
    record["skipped_steps"] = r.tr.loss_scaler().skipped_steps();
    record["loss_scale"] = r.tr.loss_scaler().scale();
  }
  if (r.evaluator.judges_best()) {
    record.update(best_model_fields(r.evaluator.tracker(), r.last_step < r.plan.total_steps));
  }
  return record;
}

}  // namespace

void report_eval(const EvalResult& ev, std::ostream& log) {
  std::vector<std::pair<std::string, double>> line = {{"eval_loss", ev.eval_loss}};
  if (ev.generated_samples > 0) line.push_back({"eval_exact_match", ev.exact_match});
  line.push_back({"eval_samples", static_cast<double>(ev.samples)});
  log << python_dict_line(line) << std::endl;
}

RunSummary finish_training(const FinishedRun& r, std::ostream& log) {
  RunSummary sum = summarize(r, log);
  report_resources(r, log);
  const std::int64_t training_device_peak = device_peak_bytes();  // before the export's buffers
  export_model(r, log);
  nlohmann::json record = closing_record(r, sum, training_device_peak);
  if (r.cfg.do_eval) {
    sum.eval = final_evaluation(r.evaluator.config(), r.tr, r.evaluator.set(), r.encoder);
    sum.evaluated = true;
    report_eval(sum.eval, log);
    record["eval_loss"] = sum.eval.eval_loss;
    if (sum.eval.generated_samples > 0) record["eval_exact_match"] = sum.eval.exact_match;
    record["eval_samples"] = sum.eval.samples;
  }
  r.metrics.add(record, r.last_step);
  end_of_run_barrier(r.parallel);
  return sum;
}

RunSummary finish_preempted(long step, const ParallelPlan& parallel) {
  RunSummary sum;
  sum.steps = step;
  sum.preempted = true;
  end_of_run_barrier(parallel);
  return sum;
}

}  // namespace shardft
