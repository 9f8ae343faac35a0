#include "train/run.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/chat_template.hpp"
#include "kernels/memory_capacity.hpp"
#include "data/datasets.hpp"
#include "data/packing.hpp"
#include "data/sampler.hpp"
#include "data/tokenizer.hpp"
#include "data/training_set.hpp"
#include "io/progress_bar.hpp"
#include "io/safetensors.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/kernel_timer.hpp"
#include "parallel/memory_estimate.hpp"
#include "train/attention_choice.hpp"
#include "train/chat_model.hpp"
#include "train/checkpoint.hpp"
#include "train/consolidate.hpp"
#include "train/hf_export.hpp"
#include "train/adapter_export.hpp"
#include "train/run_metrics.hpp"
#include "train/mfu.hpp"
#include "train/output_dir_claim.hpp"
#include "train/output_lock.hpp"
#include "train/pretrained.hpp"
#include "train/step_kernels_report.hpp"
#include "train/stop_signal.hpp"
#include "train/tokenizer_export.hpp"
#include "train/trainer.hpp"
#include "train/training_eval.hpp"

namespace shardft {

namespace {

std::string model_path(const TrainConfig& cfg) { return cfg.output_dir + "/model.safetensors"; }

std::int64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

// Collective: every rank gathers, rank 0 writes. With LoRA: the base with the adapters merged (an HF
// model that evaluates as base + adapter), and the adapter itself next to it.
void save_model(Trainer& tr, const TrainConfig& cfg, const std::string& path, bool writer) {
  std::vector<float> full = tr.engine().gather_master();
  if (!writer) return;
  const ParamLayout& layout = tr.model().layout();
  if (layout.has_frozen()) {
    write_peft_adapter(cfg.output_dir, adapter_config_of(layout.lora(), cfg.model_name_or_path),
                       lora_tensors_of(layout, full));
    merge_lora_terms(layout, full);
  }
  std::vector<NamedTensorRef> refs;
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    if (layout.params()[p].is_lora()) continue;
    refs.push_back({layout.params()[p].name, layout.params()[p].shape, full.data() + layout.offset(static_cast<int>(p))});
  }
  write_safetensors_f32(path, refs);
}


void report_eval(const EvalResult& ev, std::ostream& log) {
  std::vector<std::pair<std::string, double>> line = {{"eval_loss", ev.eval_loss}};
  if (ev.generated_samples > 0) line.push_back({"eval_exact_match", ev.exact_match});
  line.push_back({"eval_samples", static_cast<double>(ev.samples)});
  log << python_dict_line(line) << std::endl;
}

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

// Test hook: SHARDFT_FAULT="RANK:STEP:throw|exit" makes that rank fail before that optimizer step,
// so tests can prove that the other ranks are ended, never left waiting in a collective.
void maybe_inject_fault(int rank, long step) {
  static const char* spec = std::getenv("SHARDFT_FAULT");
  if (!spec) return;
  int fault_rank = -1;
  long fault_step = -1;
  char kind[16] = {0};
  if (std::sscanf(spec, "%d:%ld:%15s", &fault_rank, &fault_step, kind) != 3) return;
  if (fault_rank != rank || fault_step != step) return;
  if (std::string(kind) == "exit") std::_Exit(3);  // dies without a word, like a killed process
  throw std::runtime_error("injected fault (SHARDFT_FAULT) before step " + std::to_string(step));
}

// The eval conversations (eval_samples of them), and which tokens of each take loss.
std::vector<Conversation> eval_subset(const TrainConfig& cfg, const ChatEncoder& encoder, std::ostream& log,
                                      std::vector<LossOn>* losses = nullptr) {
  DatasetFileReport report;
  auto set = read_dataset(cfg.eval_dataset_path, dataset_options(cfg), &report);
  log << describe_skips(report) << std::flush;
  if (cfg.eval_samples > 0 && static_cast<std::size_t>(cfg.eval_samples) < set.size()) set.resize(cfg.eval_samples);
  for (std::size_t i = 0; losses && i < set.size(); ++i) losses->push_back(loss_on(cfg, report.prompt_completion[i]));
  check_eval_targets(set, encoder, cfg);
  return set;
}

// The recipe's tokenizer and chat template, checked against the model's vocabulary.
struct TextPipeline {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatEncoder> encoder;
};
TextPipeline text_pipeline(const TrainConfig& cfg, std::ostream& log) {
  TextPipeline p;
  p.tokenizer = load_tokenizer(cfg.tokenizer_name_or_path);
  if (cfg.model.vocab_size < p.tokenizer->vocab_size()) {
    throw ConfigError("vocab_size " + std::to_string(cfg.model.vocab_size) + " is smaller than the tokenizer's " +
                      std::to_string(p.tokenizer->vocab_size()) + " (" + p.tokenizer->fingerprint() + ")");
  }
  p.encoder = std::make_unique<ChatEncoder>(
      *p.tokenizer, resolve_chat_template(cfg.chat_template, cfg.tokenizer_name_or_path, *p.tokenizer));
  log << "tokenizer " << p.tokenizer->fingerprint() << " (" << p.tokenizer->vocab_size() << " ids), "
      << p.encoder->describe() << std::endl;
  return p;
}

// A step whose loss or gradient norm is NaN or Inf names the step and where the bad values are.
std::string nonfinite_step_message(long step, const StepStats& st, const std::string& first_bad,
                                   const std::string& adapter_path) {
  std::ostringstream m;
  m << "step " << step << ": " << (std::isfinite(st.loss) ? "the gradient norm" : "the loss") << " is not finite (loss "
    << st.loss << ", grad_norm " << st.grad_norm << ", learning_rate " << st.learning_rate << "); ";
  if (first_bad.empty()) {
    m << "every weight is still finite, so the overflow is in the activations or the loss";
  } else {
    m << "the first parameter holding NaN/Inf after the update is " << first_bad
      << " (its gradient or its weights were not finite)";
    // LoRA factors loaded from an adapter folder: the folder is where the values (or lora_alpha) came from.
    if (!adapter_path.empty() && first_bad.find(".lora_") != std::string::npos) {
      m << "; the LoRA factors started from adapter_path '" << adapter_path
        << "' (adapter_model.safetensors, and lora_alpha in adapter_config.json)";
    }
  }
  m << ". Check learning_rate, max_grad_norm and the data of this step, or resume from the last checkpoint";
  return m.str();
}

// What a checkpoint at `step` carries, with the best so far (its own name where this step is the best).
CheckpointState checkpoint_state(TrainingEvaluator& evaluator, long step, double total_loss, const std::string& run_id) {
  CheckpointState state{step, total_loss, run_id};
  if (!evaluator.judges_best()) return state;
  BestModelTracker& best = evaluator.tracker();
  best.checkpoint_saved(step, "checkpoint-" + std::to_string(step));
  state.best_model = best.state();
  state.keep_checkpoint = best.best_checkpoint();
  return state;
}

// load_best_model_at_end: the trainer's weights become the best checkpoint's before the export (collective).
void load_best_model(const TrainConfig& cfg, Trainer& tr, const BestModelTracker& best, long last_step,
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
    load_checkpoint(cfg.output_dir + "/" + best.best_checkpoint(), tr, log);
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
EvalResult final_evaluation(const TrainConfig& cfg, Trainer& tr, const EvalSet& set, const ChatEncoder& encoder) {
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

}  // namespace

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
  const TextPipeline text = text_pipeline(cfg, log);
  const ChatEncoder& encoder = *text.encoder;
  TrainingSet train_set = build_training_set(cfg, encoder, text.tokenizer->fingerprint(), writer, log);
  // Read now: a bad eval file fails before training.
  std::vector<Conversation> eval_conversations;
  std::vector<LossOn> eval_losses;
  if ((cfg.do_eval || evaluates_during_training(cfg)) && cfg.val_set_size == 0) {
    eval_conversations = eval_subset(cfg, encoder, log, &eval_losses);
  }
  const TokenizerExport tokenizer_files = tokenizer_export(cfg, encoder);  // beside every checkpoint and the model
  TrainingEvaluator evaluator(cfg,
                              make_eval_set(cfg, encoder, std::move(train_set.held_out), std::move(eval_conversations),
                                            std::move(eval_losses)),
                              encoder);
  const std::vector<TokenizedSample>& samples = train_set.samples;

  // The units a batch is made of: one sample each, or with packing the rows first-fit-decreasing
  // filled with samples (trl's `packing`: batch sizes then count rows).
  const std::vector<std::vector<std::int64_t>>& units = train_set.rows;
  if (cfg.packing) {
    log << "packing: " << samples.size() << " samples into " << units.size() << " rows of " << cfg.max_seq_length
        << " tokens (" << 100.0 * packing_efficiency(samples, units, cfg.max_seq_length) << "% real tokens, "
        << (cfg.packing_strategy == "bfd" ? "best" : "first") << "-fit decreasing)" << std::endl;
  }
  const long num_units = cfg.packing ? static_cast<long>(units.size()) : static_cast<long>(samples.size());
  double mean_sample_tokens = 0;
  for (const auto& smp : samples) mean_sample_tokens += static_cast<double>(smp.input_ids.size());
  mean_sample_tokens /= std::max<double>(1.0, static_cast<double>(samples.size()));
  const double flops_per_token = training_flops_per_token(cfg.model, mean_sample_tokens);
  const PeakFlops peak = resolve_peak_flops(cfg.peak_tflops, cfg.bf16 || cfg.fp16);
  const double peak_flops = peak.flops;
  log << "MFU basis: " << flops_per_token << " FLOPs per token (6 x matmul params + attention at " << mean_sample_tokens
      << " tokens per sample), peak " << peak_flops / 1e9 << " GFLOP/s per rank (" << peak.basis << ")" << std::endl;
  const int dp = world.size();
  const StepPlan plan = plan_steps(cfg, num_units, dp);
  // Collective: one run per output_dir (train/output_lock.hpp), taken before anything in it is written.
  const OutputLock output_lock = OutputLock::acquire(cfg.output_dir, parallel.host_world(), log);
  // ... and over time: a fresh run does not start among an earlier run's checkpoints (train/output_dir_claim.hpp).
  if (cfg.resume_from_checkpoint.empty()) claim_output_dir(cfg, parallel.host_world(), log);
  std::string run_id = cfg.resume_from_checkpoint.empty() ? new_run_id(parallel.host_world()) : "";
  RunMetrics metrics = writer ? RunMetrics({cfg.output_dir, cfg.report_to, cfg.logging_dir, cfg.run_name,
                                            !cfg.resume_from_checkpoint.empty()})
                             : RunMetrics();
  if (!metrics.tensorboard_dir().empty()) log << "TensorBoard: event files in " << metrics.tensorboard_dir() << std::endl;

  Trainer tr(cfg, plan.total_steps, parallel);
  for (const std::string& t : tr.ignored_weights()) log << "not loaded: " << t << std::endl;
  log << "attention: " << tr.attention().description << std::endl;
  if (tr.model().layout().has_frozen() && cfg.model_name_or_path.empty()) {
    log << "warning: LoRA without model_name_or_path: the frozen base is randomly initialised (seed "
        << cfg.seed << "), so the adapters learn on random weights (fine for benchmarks, not for fine-tuning)"
        << std::endl;
  }
  log << "memory per rank (estimate): " << tr.memory_estimate().describe() << "; budget "
      << (tr.memory_budget().bytes >= 0 ? format_bytes(tr.memory_budget().bytes) + " (" + tr.memory_budget().source + ")"
                                        : tr.memory_budget().source)
      << std::endl;
  long first_step = 0;
  double total_loss = 0;
  if (!cfg.resume_from_checkpoint.empty()) {
    const ResumePoint rp = resume_checkpoint(cfg, tr, log);
    first_step = rp.state.step;
    total_loss = rp.state.train_loss_sum;
    run_id = rp.state.run_id;
    evaluator.tracker().restore(rp.state.best_model);
    claim_output_dir(cfg, parallel.host_world(), log, &run_id);  // no other run's checkpoints to collide with
    log << "resumed from " << rp.dir << " at step " << first_step << std::endl;
  }
  const int shard_size = parallel.shard().size();
  const MemoryReport mem = tr.engine().memory();
  log << "shardft train: " << tr.model().layout().total_numel() << " parameters, " << samples.size() << " samples, "
      << (cfg.bf16 ? "bf16" : cfg.fp16 ? "fp16" : "fp32") << " compute, ZeRO stage " << cfg.zero_stage << " over " << dp << " rank"
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

  std::vector<std::int64_t> order;
  long order_epoch = -1;
  double window_loss = 0, window_seconds = 0, window_bytes = 0, window_intra = 0, window_inter = 0;
  std::int64_t window_tokens = 0;
  long window_steps = 0;
  bool preempted = false;
  // Rank 0 on a terminal: a progress line on stderr, cleared before each log line and drawn again after.
  const auto bar =
      writer && !cfg.disable_tqdm ? terminal_progress_bar("train", plan.total_steps, "steps", first_step) : nullptr;
  double run_tokens = 0, run_seconds = 0;
  StepKernels last_kernels;
  long last_kernels_step = 0;
  long last_step = plan.total_steps;  // sooner where early stopping ends the run
  if (cfg.eval_on_start) {
    evaluator.evaluate(tr, first_step, epoch_at(first_step, plan), false, log, metrics);
  }
  for (long s = first_step; s < last_step && !preempted; ++s) {
    const long epoch = s / plan.steps_per_epoch;
    if (epoch != order_epoch) {
      order = epoch_permutation(num_units, data_order_seed(cfg), epoch);
      order_epoch = epoch;
    }
    maybe_inject_fault(world.rank(), s + 1);
    std::vector<TokenBatch> micro;
    for (int m = 0; m < cfg.gradient_accumulation_steps; ++m) {
      const auto picked = micro_batch_indices(cfg, plan, order, s, m, world.rank(), dp);
      if (cfg.packing) {
        std::vector<std::vector<std::int64_t>> rows;
        for (std::int64_t u : picked) rows.push_back(units[u]);
        micro.push_back(collate_packed(samples, rows, encoder.pad_id()));
      } else {
        micro.push_back(collate(samples, picked, 1, encoder.pad_id()));
      }
    }
    const StepStats st = tr.step(micro);
    last_kernels = tr.last_step_kernels();  // every step after the first runs the same work
    last_kernels_step = s + 1;
    if (s == first_step && kernel_timer_installed()) {
      restart_kernel_timer();
      log << "kernel times (SHARDFT_KERNEL_TIMES): from step " << s + 2 << " on; step " << s + 1
          << " built graphs and sized buffers" << std::endl;
    }
    if (s - first_step < 2 && cfg.log_level == "debug") {
      // The first step sizes every buffer; the second shows what each later one moves (kernels/device_traffic.hpp).
      if (bar) bar->clear();
      log << "host<->device traffic of step " << s + 1 << (s == first_step ? " (first: sizes the buffers)" : "")
          << ", forward to weight refresh: " << tr.last_step_traffic().describe(s == first_step ? 0 : 12)
          << "; then 1 read-back of the loss, gradient norm and non-finite count" << std::endl;
    }
    // fp16: an overflowing step was skipped on every rank (weights untouched) and the loss scale lowered.
    if (!st.skipped && (!std::isfinite(st.loss) || !std::isfinite(st.grad_norm))) {
      throw std::runtime_error(nonfinite_step_message(s + 1, st, tr.first_nonfinite_parameter(), cfg.adapter_path));
    }
    if (st.skipped) {
      if (bar) bar->clear();
      log << "step " << s + 1 << ": fp16 gradient overflow at loss scale " << st.loss_scale
          << "; update skipped, loss scale now " << tr.loss_scaler().scale() << std::endl;
    }
    const double step_loss = std::isfinite(st.loss) ? st.loss : 0.0;  // a skipped step's forward may overflow
    window_loss += step_loss;
    total_loss += step_loss;
    window_seconds += st.seconds;
    window_tokens += st.tokens;
    window_bytes += st.comm_bytes;
    window_intra += st.comm_bytes_intra_node;
    window_inter += st.comm_bytes_inter_node;
    ++window_steps;
    run_tokens += static_cast<double>(st.tokens);
    run_seconds += st.seconds;
    if ((s + 1) % cfg.logging_steps == 0 || s + 1 == plan.total_steps || (cfg.logging_first_step && s == 0)) {
      if (bar) bar->clear();
      const double epoch_f = epoch_at(s + 1, plan);
      const double loss = window_loss / static_cast<double>(window_steps);
      const double tps = window_seconds > 0 ? static_cast<double>(window_tokens) / window_seconds : 0.0;
      const double mfu = flops_per_token * tps / (peak_flops * static_cast<double>(world.size()));
      const double bytes = window_bytes / static_cast<double>(window_steps);
      const double intra = window_intra / static_cast<double>(window_steps);
      const double inter = window_inter / static_cast<double>(window_steps);
      std::vector<std::pair<std::string, double>> line = {
          {"loss", loss}, {"grad_norm", st.grad_norm}, {"learning_rate", st.learning_rate}, {"epoch", epoch_f},
          {"tokens_per_second", tps}, {"mfu", mfu}, {"comm_bytes", bytes}, {"comm_bytes_inter_node", inter},
          {"step", static_cast<double>(s + 1)}};
      // fp16: the scale the next step uses (DeepSpeed logs its current scale)
      if (cfg.fp16) line.insert(line.begin() + 3, {"loss_scale", tr.loss_scaler().scale()});
      log << python_dict_line(line) << std::endl;
      if (writer) {
        nlohmann::json m{{"step", s + 1}, {"loss", loss}, {"grad_norm", st.grad_norm},
                         {"learning_rate", st.learning_rate}, {"epoch", epoch_f},
                         {"tokens_per_second", tps}, {"mfu", mfu}, {"comm_bytes", bytes},
                         {"step_seconds", window_seconds / static_cast<double>(window_steps)},
                         {"comm_bytes_intra_node", intra}, {"comm_bytes_inter_node", inter},
                         {"peak_memory_bytes", peak_rss_bytes()}};
        if (cfg.fp16) m["loss_scale"] = tr.loss_scaler().scale();
        metrics.add(m, s + 1);
      }
      window_loss = window_seconds = window_bytes = window_intra = window_inter = 0;
      window_tokens = 0;
      window_steps = 0;
    }
    BestModelTracker::Verdict judged;
    if (evaluator.due(s + 1, plan.steps_per_epoch, plan.total_steps)) {
      if (bar) bar->clear();
      judged = evaluator.evaluate(tr, s + 1, epoch_at(s + 1, plan), true, log, metrics);
    }
    // A signal on any rank (SLURM's --signal, a scheduler's SIGTERM, Ctrl-C) stops every rank at this step.
    int stop = stop_signal();
    parallel.host_world().all_reduce(&stop, &stop, 1, DType::i32, ReduceOp::max);
    preempted = stop != 0;
    if (preempted) {
      if (bar) bar->clear();
      log << stop_signal_name(stop) << ": step " << s + 1 << " done; saving a checkpoint and stopping" << std::endl;
    }
    // A preempted run saves whatever the strategy: its checkpoint is the only way on.
    if (checkpoint_due(cfg, s + 1, plan.steps_per_epoch, judged.stop ? s + 1 : plan.total_steps) || preempted ||
        (cfg.save_strategy == "best" && judged.new_best)) {
      if (bar) bar->clear();
      const std::string dir = save_checkpoint(cfg, tr, checkpoint_state(evaluator, s + 1, total_loss, run_id), &log, &tokenizer_files);
      log << "saved " << dir << std::endl;
    }
    if (judged.stop && !preempted) {
      if (bar) bar->clear();
      log << evaluator.tracker().describe_stop() << "; stopped after step " << s + 1 << " of " << plan.total_steps
          << std::endl;
      last_step = s + 1;
    }
    if (preempted) {
      log << "preempted: stopped after step " << s + 1 << " on " << stop_signal_name(stop)
          << " with a checkpoint; resume with --resume_from_checkpoint true" << std::endl;
      RunSummary sum;
      sum.steps = s + 1;
      sum.preempted = true;
      end_of_run_barrier(parallel);
      return sum;
    }
    if (bar) bar->update(s + 1, {{"loss", format_stat(st.loss)}, {"tok/s", format_si(run_tokens / run_seconds)}});
  }
  if (bar) bar->finish();

  RunSummary sum;
  sum.steps = last_step;
  sum.train_runtime = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  sum.train_samples_per_second = static_cast<double>(last_step * plan.samples_per_step) / sum.train_runtime;
  sum.train_steps_per_second = static_cast<double>(last_step) / sum.train_runtime;
  sum.train_loss = total_loss / static_cast<double>(last_step);  // over the whole run, resumed or not
  log << python_dict_line({{"train_runtime", sum.train_runtime}, {"train_samples_per_second", sum.train_samples_per_second},
                  {"train_steps_per_second", sum.train_steps_per_second}, {"train_loss", sum.train_loss},
                  {"epoch", static_cast<double>(last_step) / static_cast<double>(plan.steps_per_epoch)}})
      << std::endl;
  if (cfg.fp16) {
    log << "fp16: " << tr.loss_scaler().skipped_steps() << " of " << last_step
        << " steps skipped on gradient overflow; final loss scale " << tr.loss_scaler().scale() << std::endl;
  }
  log << describe_step_kernels(last_kernels, cfg.model.num_hidden_layers, last_kernels_step) << std::endl;
  const MemoryReport after = tr.engine().memory();
  log << "peak memory per rank: " << peak_rss_bytes() << " B measured (process RSS); model state "
      << after.weights + after.grads + after.optimizer << " B (weights " << after.weights << " B of which frozen "
      << after.frozen_weights << " B, gradients " << after.grads << " B, optimizer " << after.optimizer
      << " B) + transient gathers " << after.peak_gathered << " B (of which NF4 " << after.peak_nf4_transient
      << " B) + gradient units " << after.peak_unit_grads << " B (buffers kept for reuse at the end: " << after.pooled
      << " B)" << std::endl;
  // The capacity now beside the peak: on a GPU, what the process holds outside Kokkos' allocations
  // (the CUDA context, cuBLAS / cuDNN workspaces, NCCL's buffers) is the rest of what nvidia-smi shows.
  log << "device memory at its peak: " << describe_device_peak() << "; estimated at start: "
      << static_cast<std::int64_t>(tr.memory_estimate().total()) << " B; now " << compute_memory_capacity().source
      << std::endl;
  const std::int64_t training_device_peak = device_peak_bytes();  // before the export's buffers
  if (cfg.load_best_model_at_end) load_best_model(cfg, tr, evaluator.tracker(), last_step, log);
  save_model(tr, cfg, model_path(cfg), writer);
  if (writer) {
    // output_dir is then an HF model directory: transformers and `--model_name_or_path` both load it.
    write_hf_config(cfg.output_dir, model_meta_json(cfg.model), read_source_config(cfg.model_name_or_path),
                    TensorDtype::F32);
    write_tokenizer_export(tokenizer_files, cfg.output_dir);
  }
  log << "saved " << model_path(cfg) << " with config.json, generation_config.json"
      << (tokenizer_files.tokenizer_config.is_null() ? "" : " and the tokenizer with its chat template") << std::endl;

  nlohmann::json summary{{"train_runtime", sum.train_runtime},
                         {"train_samples_per_second", sum.train_samples_per_second},
                         {"train_steps_per_second", sum.train_steps_per_second},
                         {"train_loss", sum.train_loss},
                         {"global_step", last_step},
                         {"world_size", dp},
                         {"zero_stage", cfg.zero_stage},
                         {"peak_memory_bytes", peak_rss_bytes()}};
  summary["device_peak_memory_bytes"] = training_device_peak;  // Kokkos allocations (vendor workspaces not counted)
  summary.update(step_kernel_fields(last_kernels, cfg.model.num_hidden_layers));
  if (cfg.fp16) {
    summary["skipped_steps"] = tr.loss_scaler().skipped_steps();
    summary["loss_scale"] = tr.loss_scaler().scale();
  }
  if (evaluator.judges_best()) summary.update(best_model_fields(evaluator.tracker(), last_step < plan.total_steps));
  if (cfg.do_eval) {
    sum.eval = final_evaluation(cfg, tr, evaluator.set(), encoder);
    sum.evaluated = true;
    report_eval(sum.eval, log);
    summary["eval_loss"] = sum.eval.eval_loss;
    if (sum.eval.generated_samples > 0) summary["eval_exact_match"] = sum.eval.exact_match;
    summary["eval_samples"] = sum.eval.samples;
  }
  metrics.add(summary, last_step);
  end_of_run_barrier(parallel);
  return sum;
}

namespace {
EvalResult evaluate_and_report(Decoder& model, LocalParams& params, const std::vector<Conversation>& eval_set,
                               const std::vector<LossOn>& losses, const TrainConfig& cfg, const ChatEncoder& encoder,
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
    const std::vector<Conversation> eval_set = eval_subset(cm.cfg, *cm.encoder, log, &losses);
    return evaluate_and_report(*cm.model, *cm.params, eval_set, losses, cm.cfg, *cm.encoder, log);
  }
  const TextPipeline text = text_pipeline(cfg, log);
  std::vector<LossOn> losses;
  const std::vector<Conversation> eval_set = eval_subset(cfg, *text.encoder, log, &losses);
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
  round_to_compute_dtype(cfg, params.weights());
  return evaluate_and_report(model, params, eval_set, losses, cfg, *text.encoder, log);
}

}  // namespace shardft
