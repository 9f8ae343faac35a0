#include "data/training_set.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/data_keys.hpp"
#include "data/datasets.hpp"
#include "data/packing.hpp"
#include "io/digest64.hpp"
#include "io/hdf5_shard.hpp"
#include "io/progress_bar.hpp"

namespace shardft {
namespace fs = std::filesystem;

namespace {

constexpr const char* kCacheFormat = "shardft-tokenized-v1";

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// XXH3-64 of a whole file, read in blocks: a changed byte anywhere gives another cache key.
std::string file_content_hash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "unreadable";  // reading the data reports it, with the reason
  std::vector<char> block(1 << 20);
  Digest64 digest;
  std::uint64_t bytes = 0;
  while (in.read(block.data(), static_cast<std::streamsize>(block.size())) || in.gcount() > 0) {
    const auto n = static_cast<std::size_t>(in.gcount());
    digest.update(block.data(), n);
    bytes += n;
  }
  return digest.text() + " (" + std::to_string(bytes) + " bytes)";
}

// Progress of a long tokenization: a line at most every two seconds, then a summary. With `bar` (rank 0)
// and stderr a terminal, a progress bar there instead of the lines.
class TokenizeProgress {
 public:
  TokenizeProgress(std::ostream& log, std::size_t total, bool bar)
      : log_(log), total_(total), start_(Clock::now()), last_(start_),
        bar_(bar ? terminal_progress_bar("tokenize", static_cast<long>(total), "samples") : nullptr) {}
  void tick(std::size_t done, std::int64_t tokens) {
    if (bar_) {
      if (bar_->due(static_cast<long>(done))) bar_->update(static_cast<long>(done), {{"tokens", format_si(tokens)}});
      return;
    }
    const auto now = Clock::now();
    if (std::chrono::duration<double>(now - last_).count() < 2.0) return;
    last_ = now;
    log_ << "tokenizing: " << bar(done) << " " << done << "/" << total_ << " samples, " << tokens << " tokens, "
         << static_cast<long>(done / seconds(now)) << " samples/s" << std::endl;
  }
  void finish(std::int64_t tokens) {
    if (bar_) bar_->clear();
    const double s = seconds(Clock::now());
    log_ << "tokenized " << total_ << " samples (" << tokens << " tokens) in " << s << " s" << std::endl;
  }

 private:
  using Clock = std::chrono::steady_clock;
  double seconds(Clock::time_point t) const { return std::max(1e-9, std::chrono::duration<double>(t - start_).count()); }
  std::string bar(std::size_t done) const {
    const int width = 20, filled = total_ ? static_cast<int>(width * done / total_) : width;
    return "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] " +
           std::to_string(total_ ? 100 * done / total_ : 100) + "%";
  }
  std::ostream& log_;
  std::size_t total_;
  Clock::time_point start_, last_;
  std::unique_ptr<ProgressBar> bar_;
};

}  // namespace

std::string training_set_settings(const TrainingSetConfig& cfg, const ChatEncoder& encoder, const std::string& tokenizer_fp) {
  std::ostringstream s;
  s << "format: " << kCacheFormat << "\n";
  for (const DatasetSpec& d : cfg.datasets) {
    s << "dataset: " << d.path << " weight " << d.weight << " content " << file_content_hash(d.path) << "\n";
  }
  s << "seed: " << cfg.seed << "\n"  // the mixture's draw depends on it
    << "dataset_text_field: " << cfg.options.text_field << "\n"
    << "role_map: " << cfg.role_map << "\n"
    << "skip_bad_samples: " << cfg.options.skip_bad_samples << "\n"
    << "tokenizer: " << tokenizer_fp << "\n"
    << "chat_template: " << chat_template_label(encoder.chat_template()) << " bos '" << encoder.chat_template().bos
    << "' eos '" << encoder.chat_template().eos << "'\n"
    << "max_seq_length: " << cfg.max_seq_length << "\n"
    << "packing: " << cfg.packing << "\n";
  if (cfg.packing && cfg.packing_strategy != "ffd") s << "packing_strategy: " << cfg.packing_strategy << "\n";
  if (cfg.val_set_size > 0) s << "val_set_size: " << cfg.val_set_size << "\n";
  if (!cfg.loss.assistant_only || !cfg.loss.completion_only) {
    s << "loss: assistant_only " << cfg.loss.assistant_only << " completion_only " << cfg.loss.completion_only << "\n";
  }
  return s.str();
}

std::string training_set_cache_path(const std::string& cache_dir, const std::string& settings) {
  return (fs::path(cache_dir) / ("tokenized-" + hex64(checksum64(settings.data(), settings.size())) + ".h5")).string();
}

namespace {
// Samples as three datasets: <prefix>offsets (n + 1 token offsets), <prefix>input_ids, <prefix>labels.
bool read_samples(Hdf5ShardReader& r, const std::string& prefix, std::vector<TokenizedSample>& out) {
  for (const char* name : {"offsets", "input_ids", "labels"}) r.verify(prefix + name);
  const std::vector<std::int64_t> offsets = r.read_i64(prefix + "offsets");
  const std::vector<std::int32_t> ids = r.read_i32(prefix + "input_ids"), labels = r.read_i32(prefix + "labels");
  if (offsets.empty() || ids.size() != labels.size() || static_cast<std::size_t>(offsets.back()) != ids.size()) {
    return false;
  }
  out.resize(offsets.size() - 1);
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
    if (offsets[i] < 0 || offsets[i] > offsets[i + 1]) return false;
    out[i].input_ids.assign(ids.begin() + offsets[i], ids.begin() + offsets[i + 1]);
    out[i].labels.assign(labels.begin() + offsets[i], labels.begin() + offsets[i + 1]);
  }
  return true;
}

void write_samples(Hdf5ShardWriter& w, const std::string& prefix, const std::vector<TokenizedSample>& samples,
                   const Attributes& attributes) {
  std::vector<std::int64_t> offsets{0};
  std::vector<std::int32_t> ids, labels;
  for (const TokenizedSample& s : samples) {
    ids.insert(ids.end(), s.input_ids.begin(), s.input_ids.end());
    labels.insert(labels.end(), s.labels.begin(), s.labels.end());
    offsets.push_back(static_cast<std::int64_t>(ids.size()));
  }
  w.write_i64(prefix + "offsets", offsets.data(), offsets.size(), attributes);
  w.write_i32(prefix + "input_ids", ids.data(), ids.size(), {});
  w.write_i32(prefix + "labels", labels.data(), labels.size(), {});
}
}  // namespace

bool read_training_set_cache(const std::string& path, const std::string& settings, TrainingSet& out) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  try {
    Hdf5ShardReader r(path);
    if (r.attributes("offsets").count("settings") == 0 || r.attributes("offsets").at("settings") != settings) return false;
    TrainingSet set;
    if (!read_samples(r, "", set.samples)) return false;
    if (r.has("held_out_offsets") && !read_samples(r, "held_out_", set.held_out)) return false;
    if (r.has("row_offsets")) {
      r.verify("row_offsets");
      r.verify("row_samples");
      const auto row_offsets = r.read_i64("row_offsets"), row_samples = r.read_i64("row_samples");
      for (std::size_t i = 0; i + 1 < row_offsets.size(); ++i) {
        set.rows.emplace_back(row_samples.begin() + row_offsets[i], row_samples.begin() + row_offsets[i + 1]);
      }
    }
    set.report = r.attributes("offsets").count("report") ? r.attributes("offsets").at("report") : "";
    set.from_cache = true;
    set.cache_path = path;
    out = std::move(set);
    return true;
  } catch (const FormatError&) {
    return false;  // damaged or foreign: build it again
  }
}

void write_training_set_cache(const std::string& path, const std::string& settings, const TrainingSet& set) {
  fs::create_directories(fs::path(path).parent_path());
  // Unique per writer, renamed into place: readers see no file or a whole one.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    Hdf5ShardWriter w(tmp);
    write_samples(w, "", set.samples, {{"settings", settings}, {"report", set.report}});
    if (!set.held_out.empty()) write_samples(w, "held_out_", set.held_out, {});
    if (!set.rows.empty()) {
      std::vector<std::int64_t> row_offsets{0}, row_samples;
      for (const auto& row : set.rows) {
        row_samples.insert(row_samples.end(), row.begin(), row.end());
        row_offsets.push_back(static_cast<std::int64_t>(row_samples.size()));
      }
      w.write_i64("row_offsets", row_offsets.data(), row_offsets.size(), {});
      w.write_i64("row_samples", row_samples.data(), row_samples.size(), {});
    }
    w.close();
  }
  fs::rename(tmp, path);
}

namespace {

std::string describe_split(const TrainingSetConfig& cfg, const TrainingSet& set) {
  std::ostringstream s;
  s << "val_set_size " << cfg.val_set_size << ": " << set.held_out.size() << " samples held out for evaluation, "
    << set.samples.size() << " to train on\n";
  return s.str();
}

bool has_target(const TokenizedSample& s) {
  return std::any_of(s.labels.begin(), s.labels.end(), [](std::int32_t l) { return l != -100; });
}

// Per file of the mixture (its samples are consecutive in the mixed set), the samples cut at
// max_seq_length and those left with no target token, which train nothing.
std::string describe_data_checks(const MixedDataset& mixed, const std::vector<TokenizedSample>& samples,
                                 int max_seq_length) {
  std::ostringstream s;
  std::size_t first = 0;
  for (const MixedDataset::Part& p : mixed.parts) {
    const std::size_t end = std::min(samples.size(), first + static_cast<std::size_t>(p.used));
    std::int64_t truncated = 0, no_target = 0;
    for (std::size_t i = first; i < end; ++i) {
      truncated += samples[i].truncated ? 1 : 0;
      no_target += has_target(samples[i]) ? 0 : 1;
    }
    if (truncated > 0 || no_target > 0) {
      s << "dataset " << p.spec.path << ": " << truncated << " of " << (end - first)
        << " samples truncated to max_seq_length " << max_seq_length << ", " << no_target
        << " with no target token left (they train nothing)\n";
    }
    first = end;
  }
  return s.str();
}

}  // namespace

LossOn loss_on(const LossSwitches& loss, bool prompt_completion) {
  return (prompt_completion ? loss.completion_only : loss.assistant_only) ? LossOn::assistant : LossOn::all;
}

std::vector<TokenizedSample> split_held_out(std::vector<TokenizedSample>& samples, double size, std::uint64_t seed) {
  const auto n = static_cast<std::int64_t>(samples.size());
  const auto count = static_cast<std::int64_t>(size < 1 ? std::ceil(size * static_cast<double>(n)) : size);
  if (count < 1 || count >= n) {
    std::ostringstream given;
    given << size;
    throw DataError("val_set_size " + given.str() + " holds out " + std::to_string(count) + " of the " +
                    std::to_string(n) + " training samples; both the eval split and the training set need at least one");
  }
  // A stream of its own, far from the training epochs' (0, 1, ...) and the mixture's draws (-1, -2, ...).
  constexpr std::int64_t kHeldOutStream = -(std::int64_t{1} << 40);
  const std::vector<std::int64_t> order = epoch_permutation(n, seed, kHeldOutStream);
  std::vector<char> held(static_cast<std::size_t>(n), 0);
  for (std::int64_t i = 0; i < count; ++i) held[static_cast<std::size_t>(order[i])] = 1;
  std::vector<TokenizedSample> kept, out;
  kept.reserve(static_cast<std::size_t>(n - count));
  out.reserve(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < n; ++i) (held[i] ? out : kept).push_back(std::move(samples[i]));
  samples = std::move(kept);
  return out;
}

void check_training_targets(const std::vector<TokenizedSample>& samples, int max_seq_length) {
  if (std::any_of(samples.begin(), samples.end(), has_target)) return;
  throw DataError("the training set (" + std::to_string(samples.size()) +
                  " samples) has no target token: every answer lies past max_seq_length " +
                  std::to_string(max_seq_length) +
                  " or no sample has an assistant turn; raise max_seq_length or check the data");
}

void check_eval_targets(const std::vector<Conversation>& eval_set, const ChatEncoder& encoder, int max_seq_length,
                        const std::string& eval_path) {
  if (eval_set.empty()) return;
  for (const Conversation& c : eval_set) {
    if (has_target(encoder.encode(c, max_seq_length))) return;
  }
  throw DataError(eval_path + ": the evaluation set (" + std::to_string(eval_set.size()) +
                  " samples) has no target token: every answer lies past max_seq_length " +
                  std::to_string(max_seq_length) +
                  " or no sample has an assistant turn, so its eval_loss would read 0; raise max_seq_length or "
                  "check the data");
}

TrainingSet build_training_set(const TrainingSetConfig& cfg, const ChatEncoder& encoder, const std::string& tokenizer_fp,
                               bool write_cache, std::ostream& log) {
  std::string settings, path;
  if (!cfg.cache_dir.empty()) {
    settings = training_set_settings(cfg, encoder, tokenizer_fp);
    path = training_set_cache_path(cfg.cache_dir, settings);
    TrainingSet cached;
    if (read_training_set_cache(path, settings, cached)) {
      log << cached.report << "tokenized dataset from cache " << path << " (" << cached.samples.size() << " samples)"
          << std::endl;
      if (cfg.val_set_size > 0) log << describe_split(cfg, cached) << std::flush;
      check_training_targets(cached.samples, cfg.max_seq_length);
      return cached;
    }
  }
  TrainingSet set;
  const MixedDataset mixed = mix_datasets(cfg.datasets, cfg.options, cfg.seed);
  set.report = describe_mixture(mixed);
  log << set.report << std::flush;
  set.samples.reserve(mixed.samples.size());
  TokenizeProgress progress(log, mixed.samples.size(), write_cache);  // write_cache: rank 0
  std::int64_t tokens = 0;
  for (std::size_t i = 0; i < mixed.samples.size(); ++i) {
    set.samples.push_back(encoder.encode(mixed.samples[i], cfg.max_seq_length, loss_on(cfg.loss, mixed.prompt_completion[i])));
    tokens += static_cast<std::int64_t>(set.samples.back().input_ids.size());
    progress.tick(set.samples.size(), tokens);
  }
  progress.finish(tokens);
  const std::string checks = describe_data_checks(mixed, set.samples, cfg.max_seq_length);
  log << checks << std::flush;
  set.report += checks;
  if (cfg.val_set_size > 0) {
    set.held_out = split_held_out(set.samples, cfg.val_set_size, cfg.seed);
    log << describe_split(cfg, set) << std::flush;
  }
  check_training_targets(set.samples, cfg.max_seq_length);
  if (cfg.packing) set.rows = pack_samples(set.samples, cfg.max_seq_length, cfg.packing_strategy);
  set.cache_path = path;
  if (write_cache && !path.empty()) {
    try {
      write_training_set_cache(path, settings, set);
      log << "tokenized dataset cached in " << path << std::endl;
    } catch (const std::exception& e) {
      // A read-only or full disk costs the next run some time, never this one.
      log << "warning: could not cache the tokenized dataset in " << path << ": " << e.what() << std::endl;
    }
  }
  return set;
}

}  // namespace shardft
