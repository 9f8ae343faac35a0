#include "train/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "io/checkpoint_meta.hpp"
#include "io/hdf5_shard.hpp"
#include "comm/collective_error.hpp"
#include "infer/hf_export.hpp"
#include "infer/adapter_export.hpp"
#include "infer/qlora_base.hpp"
#include "config/config_error.hpp"

namespace fs = std::filesystem;

namespace shardft {

namespace {

const char* kStates[] = {"master", "exp_avg", "exp_avg_sq"};
constexpr std::size_t kDigestTextBytes = 32;  // "xxh3_64:<16 hex>" and its terminating zeros

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) throw FormatError("cannot write '" + tmp + "'");
  }
  fsync_path(tmp);
  fs::rename(tmp, path);
}

std::string rank_file(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d.h5", rank);
  return name;
}

// Test hook: SHARDFT_CRASH_IN_SAVE=RANK:STEP kills that rank while it saves checkpoint-STEP, after its
// shard is written and before the checkpoint is complete, as a power cut would.
void maybe_crash_in_save(int rank, long step) {
  const char* spec = std::getenv("SHARDFT_CRASH_IN_SAVE");
  int r = -1;
  long s = -1;
  if (spec && std::sscanf(spec, "%d:%ld", &r, &s) == 2 && r == rank && s == step) std::_Exit(9);
}

// Test hook: SHARDFT_FAIL_IN_SAVE=RANK:STEP makes that rank's write of checkpoint-STEP fail as a full
// disk would, after its shard file was begun.
void maybe_fail_in_save(int rank, long step) {
  const char* spec = std::getenv("SHARDFT_FAIL_IN_SAVE");
  int r = -1;
  long s = -1;
  if (spec && std::sscanf(spec, "%d:%ld", &r, &s) == 2 && r == rank && s == step) {
    throw FormatError("cannot write (SHARDFT_FAIL_IN_SAVE: simulated full disk)");
  }
}

bool is_stale_tmp(const std::string& name) {  // checkpoint-N.tmp, or latest.tmp from write_file_atomically
  if (name == "latest.tmp") return true;
  if (name.rfind("checkpoint-", 0) != 0 || name.size() <= 15 || name.compare(name.size() - 4, 4, ".tmp") != 0) return false;
  return std::all_of(name.begin() + 11, name.end() - 4, [](char c) { return c >= '0' && c <= '9'; });
}

// Rank 0, before a save: what an interrupted save (kill -9, power cut) of this output_dir left behind.
// They are never a checkpoint (the rename to checkpoint-N is the commit) and may hold gigabytes.
void remove_stale_tmp(const std::string& output_dir, std::ostream* log) {
  std::error_code ec;
  if (!fs::exists(output_dir, ec)) return;  // the first save of a run creates it
  for (const auto& e : fs::directory_iterator(output_dir, ec)) {
    const std::string n = e.path().filename().string();
    if (!is_stale_tmp(n)) continue;
    fs::remove_all(e.path());  // throws, naming the path, when it cannot
    if (log) *log << "save: removed " << e.path().string() << " left by an interrupted save" << std::endl;
  }
  if (ec) throw fs::filesystem_error("cannot list output_dir", output_dir, ec);
}

// Every rank: the save failed somewhere (`err`, agreed). Rank 0 removes the partial directory.
[[noreturn]] void abandon_save(Communicator& world, const std::string& output_dir, const std::string& tmp_dir,
                               const std::string& err) {
  std::string cleanup;
  if (world.rank() == 0) {
    std::error_code ec;
    fs::remove_all(tmp_dir, ec);
    if (ec) cleanup = " (and " + tmp_dir + " could not be removed: " + ec.message() + ")";
  }
  std::string latest = "none";
  std::ifstream in(output_dir + "/latest");
  if (in) std::getline(in, latest);
  throw ConfigError("output_dir '" + output_dir + "': saving " + fs::path(tmp_dir).stem().string() + " failed: " + err +
                    cleanup + "; the last good checkpoint is kept (latest: " + latest + ")");
}

// save_total_limit: the newest `keep` checkpoints of this run (by run_id) stay, and `best` (the best
// checkpoint, as HF keeps it) beside them; its older ones go, each named on the log. Another run's
// checkpoints, and ones whose metadata does not read, are never touched.
void remove_old_checkpoints(const std::string& output_dir, int keep, const std::string& run_id,
                            const std::string& best, std::ostream* log) {
  std::vector<std::pair<long, fs::path>> found;
  for (const auto& e : fs::directory_iterator(output_dir)) {
    const std::string n = e.path().filename().string();
    if (!e.is_directory() || n.rfind("checkpoint-", 0) != 0 || n.find(".tmp") != std::string::npos) continue;
    try {
      if (read_checkpoint_meta(e.path().string()).json.value("run_id", std::string()) != run_id) continue;
    } catch (const std::exception&) {
      continue;
    }
    found.emplace_back(std::atol(n.c_str() + 11), e.path());
  }
  std::sort(found.begin(), found.end());
  const std::size_t old = found.size() > static_cast<std::size_t>(keep) ? found.size() - keep : 0;
  bool best_spared = false;
  for (std::size_t i = 0; i < old; ++i) best_spared |= !best.empty() && found[i].second.filename().string() == best;
  for (std::size_t i = 0; i < old; ++i) {
    if (best_spared && found[i].second.filename().string() == best) continue;
    fs::remove_all(found[i].second);
    if (log) {
      *log << "save_total_limit " << keep << ": removed " << found[i].second.filename().string()
           << (best_spared ? " (kept " + best + ", the best)" : "") << std::endl;
    }
  }
}

// Every rank: rank 0 clears what an interrupted save left and makes the temporary directory.
void begin_save(Communicator& world, const std::string& output_dir, const std::string& tmp_dir, std::ostream* log) {
  std::string err;
  if (world.rank() == 0) {
    try {
      remove_stale_tmp(output_dir, log);
      fs::create_directories(tmp_dir);
    } catch (const std::exception& e) {
      err = e.what();
    }
  }
  err = broadcast_text(world, err, 0);
  if (!err.empty()) abandon_save(world, output_dir, tmp_dir, err);
}

// The parameter table of metadata.json; its fingerprint goes into every dataset's attributes.
nlohmann::json param_table(const ParamLayout& layout) {
  nlohmann::json params = nlohmann::json::array();
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    params.push_back({{"name", layout.params()[p].name}, {"shape", layout.params()[p].shape},
                      {"layout_offset", layout.offset(static_cast<int>(p))}});
  }
  return params;
}

// LoRA, every rank: the adapter in PEFT's form too, so any checkpoint loads in peft.PeftModel.from_pretrained.
void save_adapter_copy(ZeroEngine& eng, const ParamLayout& layout, Communicator& world, const std::string& output_dir,
                       const std::string& model_name_or_path, const std::string& tmp_dir) {
  const std::vector<float> trained = eng.gather_trainable();
  std::string err;
  if (world.rank() == 0) {
    try {
      write_peft_adapter(tmp_dir, adapter_config_of(layout.lora(), model_name_or_path), lora_tensors_of(layout, trained));
    } catch (const std::exception& e) {
      err = e.what();
    }
  }
  err = broadcast_text(world, err, 0);
  if (!err.empty()) abandon_save(world, output_dir, tmp_dir, err);
}

// A writing rank's file: its owned region of the three optimizer states and the table (layout_offset,
// owned_offset, length per slice) that places it. Fills `digest_text` with the whole file's digest, read
// back from the page cache (readers check it before HDF5 parses a byte); returns what failed, or "".
std::string write_rank_shard(ZeroEngine& eng, const std::string& path, const Attributes& common,
                             const std::vector<std::int64_t>& table, int rank, long step, std::vector<char>& digest_text) {
  try {
    Hdf5ShardWriter w(path);
    View1<float> states[] = {eng.master(), eng.exp_avg(), eng.exp_avg_sq()};
    for (int k = 0; k < 3; ++k) {
      auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), states[k]);
      Attributes a = common;
      a["offset"] = "owned region; see 'slices' (layout_offset, owned_offset, length)";
      w.write_f32(kStates[k], host.data(), host.extent(0), a);
      if (k == 0) maybe_fail_in_save(rank, step);
    }
    w.write_i64("slices", table.data(), table.size(), common);
    w.close();
    const std::string digest = file_digest(path);
    std::copy(digest.begin(), digest.end(), digest_text.begin());
  } catch (const std::exception& e) {  // agreed on by the caller, so that every rank stops and rank 0 cleans up
    return e.what();
  }
  return "";
}

// Collective: metadata.json's "files", every writing rank's file with its slice table and digest (used
// on rank 0).
nlohmann::json gather_file_list(Communicator& world, int writes, const std::vector<std::int64_t>& table,
                                std::vector<char>& digest_text) {
  std::vector<int> flags(world.size());
  world.all_gather(&writes, flags.data(), 1, DType::i32);
  std::vector<int> sizes(world.size());
  int my_size = static_cast<int>(table.size());
  world.all_gather(&my_size, sizes.data(), 1, DType::i32);
  const int max_size = *std::max_element(sizes.begin(), sizes.end());
  std::vector<std::int64_t> padded(max_size, -1), all(static_cast<std::size_t>(max_size) * world.size());
  std::copy(table.begin(), table.end(), padded.begin());
  world.all_gather(padded.data(), all.data(), max_size, DType::i64);
  std::vector<char> digests(kDigestTextBytes * static_cast<std::size_t>(world.size()));
  world.all_gather(digest_text.data(), digests.data(), kDigestTextBytes, DType::u8);
  nlohmann::json files = nlohmann::json::array();
  for (int r = 0; r < world.size(); ++r) {
    if (!flags[r]) continue;
    std::vector<std::int64_t> t(all.begin() + static_cast<long>(r) * max_size,
                                all.begin() + static_cast<long>(r) * max_size + sizes[r]);
    files.push_back({{"file", rank_file(r)}, {"rank", r}, {"slices", t},
                     {"digest", std::string(digests.data() + kDigestTextBytes * static_cast<std::size_t>(r))}});
  }
  return files;
}

// Rank 0: metadata.json, sealed last (the seal covers every other field).
nlohmann::json checkpoint_metadata(const CheckpointConfig& cfg, Trainer& tr, const CheckpointState& state,
                                   const std::string& fingerprint, nlohmann::json params, nlohmann::json files,
                                   const std::string& tmp_dir) {
  const ParamLayout& layout = tr.model().layout();
  const Communicator& world = tr.plan().host_world();
  nlohmann::json meta = {{"format", kCheckpointFormat},
                         {"step", state.step},
                         {"train_loss_sum", state.train_loss_sum},
                         {"world_size", world.size()},
                         {"zero_stage", cfg.zero_stage},
                         {"shard_group_size", tr.engine().group().size()},
                         {"total_numel", layout.total_numel()},
                         {"layout", fingerprint},
                         {"model", model_meta_json(cfg.model)},
                         {"hf_config", read_source_config(cfg.model_name_or_path)},
                         {"config", cfg.recipe_yaml},
                         {"params", std::move(params)},
                         {"files", std::move(files)}};
  // fp16: skipped steps did not advance the optimizer (nor the LR schedule); the scale goes on as it was.
  if (tr.loss_scaler().enabled()) {
    meta["optimizer_steps"] = tr.steps_done();
    meta["loss_scaler"] = tr.loss_scaler().state();
  }
  // QLoRA: what an adapter merge must quantize the base to (infer/qlora_base.hpp).
  const nlohmann::json qlora = qlora_base_meta(layout, cfg.dtype);
  if (!qlora.is_null()) meta["qlora_base"] = qlora;
  if (!state.run_id.empty()) meta["run_id"] = state.run_id;
  if (!state.best_model.is_null()) meta["best_model"] = state.best_model;
  if (layout.has_frozen()) {  // LoRA: its scale (checked on resume) and the PEFT files' digests
    const LoraSpec& lora = layout.lora();
    meta["lora"] = {{"r", lora.r}, {"lora_alpha", lora.alpha}, {"use_rslora", lora.use_rslora}};
    meta["adapter_files"] = adapter_file_digests(tmp_dir);
  }
  seal_metadata(meta);
  return meta;
}

}  // namespace

std::string save_checkpoint(const CheckpointConfig& cfg, Trainer& tr, const CheckpointState& state, std::ostream* log,
                            const TokenizerExport* tokenizer) {
  Communicator& world = tr.plan().host_world();  // host buffers: MPI even where collectives run on NCCL
  ZeroEngine& eng = tr.engine();
  const std::string name = "checkpoint-" + std::to_string(state.step);
  const std::string final_dir = cfg.output_dir + "/" + name, tmp_dir = final_dir + ".tmp";
  begin_save(world, cfg.output_dir, tmp_dir, log);
  const ParamLayout& layout = tr.model().layout();
  nlohmann::json params = param_table(layout);
  const std::string fingerprint = layout_fingerprint(params, layout.total_numel());
  if (layout.has_frozen()) save_adapter_copy(eng, layout, world, cfg.output_dir, cfg.model_name_or_path, tmp_dir);

  std::vector<std::int64_t> table;
  for (const auto& s : eng.owned_slices()) table.insert(table.end(), {s.layout_offset, s.owned_offset, s.length});
  const int writes = eng.writes_checkpoint() ? 1 : 0;
  std::vector<char> digest_text(kDigestTextBytes, '\0');
  std::string err;
  if (writes) {
    const Attributes common = {{"format", kCheckpointFormat},
                               {"layout", fingerprint},
                               {"full_shape", "[" + std::to_string(layout.total_numel()) + "]"},
                               {"stage", std::to_string(cfg.zero_stage)},
                               {"world_size", std::to_string(world.size())},
                               {"shard_group_size", std::to_string(eng.group().size())},
                               {"shard_rank", std::to_string(eng.group().rank())},
                               {"step", std::to_string(state.step)}};
    err = write_rank_shard(eng, tmp_dir + "/" + rank_file(world.rank()), common, table, world.rank(), state.step,
                           digest_text);
  }
  maybe_crash_in_save(world.rank(), state.step);
  err = first_error(world, err);
  if (!err.empty()) abandon_save(world, cfg.output_dir, tmp_dir, err);

  // Rank 0 learns every file's slice table, then completes the checkpoint.
  nlohmann::json files = gather_file_list(world, writes, table, digest_text);
  bool committed = false;  // once renamed, checkpoint-N is complete and stays even if a later step fails
  if (world.rank() == 0) {
    try {
      const nlohmann::json meta =
          checkpoint_metadata(cfg, tr, state, fingerprint, std::move(params), std::move(files), tmp_dir);
      // Like HF Trainer, each checkpoint carries the tokenizer, so an export needs nothing else.
      if (tokenizer) {
        write_tokenizer_export(*tokenizer, tmp_dir);
      } else {
        copy_tokenizer_files(cfg.tokenizer_name_or_path, tmp_dir);
      }
      write_file_atomically(tmp_dir + "/metadata.json", meta.dump(1));
      fsync_path(tmp_dir);
      fs::remove_all(final_dir);
      fs::rename(tmp_dir, final_dir);
      committed = true;
      fsync_path(cfg.output_dir);
      write_file_atomically(cfg.output_dir + "/latest", name + "\n");
      if (cfg.save_total_limit > 0) remove_old_checkpoints(cfg.output_dir, cfg.save_total_limit, state.run_id, state.keep_checkpoint, log);
    } catch (const std::exception& e) {
      err = e.what();
    }
  }
  err = broadcast_text(world, err, 0);
  if (!err.empty() && !committed) abandon_save(world, cfg.output_dir, tmp_dir, err);
  if (!err.empty()) throw ConfigError("output_dir '" + cfg.output_dir + "': " + name + " is complete, but " + err);
  return final_dir;
}

bool checkpoint_due(const SaveSchedule& s, long step, long steps_per_epoch, long total_steps) {
  const bool last = step == total_steps;
  if (s.save_strategy == "epoch") return last || (steps_per_epoch > 0 && step % steps_per_epoch == 0);
  if (s.save_strategy == "steps") return last || (s.save_steps > 0 && step % s.save_steps == 0);
  return false;  // no; best: at a new best evaluation, which the run decides
}

}  // namespace shardft
