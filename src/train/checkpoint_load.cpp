// Reading a checkpoint back for training: every rank checks metadata.json's seal and verifies each rank
// file it is going to read before it reads it; the ranks then agree (comm/collective_error.hpp) on
// whether the checkpoint is good, so they all load, fall back or stop together.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>

#include "io/checkpoint_meta.hpp"
#include "io/hdf5_shard.hpp"
#include "train/checkpoint.hpp"
#include "comm/collective_error.hpp"

namespace fs = std::filesystem;

namespace shardft {

namespace {

// The model of the recipe must be the checkpoint's: same tensors, names and shapes.
void check_same_model(const CheckpointMeta& meta, const ParamLayout& layout) {
  const nlohmann::json& m = meta.json;
  if (m.at("total_numel").get<std::int64_t>() != layout.total_numel() || m.at("params").size() != layout.params().size()) {
    throw FormatError(meta.path + ": the checkpoint holds another model (" + m.at("model").dump() + ")");
  }
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const auto& mp = m.at("params")[p];
    if (mp.at("name") != layout.params()[p].name || mp.at("shape").get<std::vector<std::int64_t>>() != layout.params()[p].shape) {
      throw FormatError(meta.path + ": parameter '" + mp.at("name").get<std::string>() + "' does not match the recipe's model");
    }
  }
  // LoRA's scale is no shape: a resume with another lora_alpha (or use_rslora) would rescale what the
  // adapter learned, silently.
  const LoraSpec& lora = layout.lora();
  if (lora.enabled && m.contains("lora")) {
    const double alpha = m.at("lora").at("lora_alpha").get<double>();
    const bool rslora = m.at("lora").at("use_rslora").get<bool>();
    if (alpha != lora.alpha || rslora != lora.use_rslora) {
      std::ostringstream s;
      s << meta.path << ": the adapter was trained with lora_alpha " << alpha << (rslora ? " (use_rslora)" : "")
        << "; this run has lora_alpha " << lora.alpha << (lora.use_rslora ? " (use_rslora)" : "")
        << ": resuming would change the adapter's scale. Resume with the checkpoint's lora_alpha / use_rslora, or "
           "start a new run";
      throw FormatError(s.str());
    }
  }
}

std::vector<std::vector<std::int64_t>> slice_tables(const CheckpointMeta& meta) {
  std::vector<std::vector<std::int64_t>> tables;
  for (const auto& f : meta.json.at("files")) tables.push_back(f.at("slices").get<std::vector<std::int64_t>>());
  return tables;
}

// Which rank files hold a part of what this rank owns now: the files it reads, and so verifies.
std::vector<bool> files_to_read(const std::vector<std::vector<std::int64_t>>& tables,
                                const std::vector<ZeroEngine::OwnedSlice>& owned) {
  std::vector<bool> reads(tables.size(), false);
  for (const auto& mine : owned) {
    for (std::size_t f = 0; f < tables.size(); ++f) {
      const auto& t = tables[f];
      for (std::size_t i = 0; i + 2 < t.size(); i += 3) {
        if (std::max(mine.layout_offset, t[i]) < std::min(mine.layout_offset + mine.length, t[i] + t[i + 2])) reads[f] = true;
      }
    }
  }
  return reads;
}

// This rank's part of check_checkpoint: "" or why the checkpoint cannot be used.
std::string check_local(const std::string& dir, Trainer& tr, std::string& warning) {
  try {
    const CheckpointMeta meta = read_checkpoint_meta(dir);
    warning = meta.warning;
    check_same_model(meta, tr.model().layout());
    const std::vector<bool> reads = files_to_read(slice_tables(meta), tr.engine().owned_slices());
    for (std::size_t f = 0; f < reads.size(); ++f) {
      if (reads[f]) verify_rank_file(meta, f);
    }
    return "";
  } catch (const std::exception& e) {  // any failure must reach the agreement, or the other ranks would hang
    return e.what();
  }
}

// Fills the engine from a checkpoint every rank has checked. Each rank reads only the ranges it owns.
CheckpointState read_state(const std::string& dir, Trainer& tr) {
  const CheckpointMeta meta = read_checkpoint_meta(dir);
  ZeroEngine& eng = tr.engine();
  View1<float> states[] = {eng.master(), eng.exp_avg(), eng.exp_avg_sq()};
  const char* names[] = {"master", "exp_avg", "exp_avg_sq"};
  std::vector<decltype(Kokkos::create_mirror_view(states[0]))> host;
  for (auto& s : states) host.push_back(Kokkos::create_mirror_view(s));
  for (auto& h : host) Kokkos::deep_copy(h, 0.f);
  const auto& files = meta.json.at("files");
  const auto tables = slice_tables(meta);
  std::vector<std::unique_ptr<Hdf5ShardReader>> readers(files.size());  // each file opened at most once
  for (const auto& mine : eng.owned_slices()) {
    std::int64_t covered = 0;
    for (std::size_t f = 0; f < files.size(); ++f) {
      const auto& t = tables[f];
      for (std::size_t i = 0; i + 2 < t.size(); i += 3) {
        const std::int64_t lo = std::max(mine.layout_offset, t[i]);
        const std::int64_t hi = std::min(mine.layout_offset + mine.length, t[i] + t[i + 2]);
        if (lo >= hi) continue;
        if (!readers[f]) readers[f] = std::make_unique<Hdf5ShardReader>(dir + "/" + files[f].at("file").get<std::string>());
        for (int k = 0; k < 3; ++k) {
          readers[f]->read_f32(names[k], static_cast<std::size_t>(t[i + 1] + (lo - t[i])), static_cast<std::size_t>(hi - lo),
                               host[k].data() + mine.owned_offset + (lo - mine.layout_offset));
        }
        covered += hi - lo;
      }
    }
    if (covered != mine.length) {
      throw FormatError(meta.path + ": elements " + std::to_string(mine.layout_offset) + ".." +
                        std::to_string(mine.layout_offset + mine.length) + " are in no rank file (a missing rank file?)");
    }
  }
  for (int k = 0; k < 3; ++k) Kokkos::deep_copy(states[k], host[k]);
  CheckpointState st;
  st.step = meta.json.at("step").get<long>();
  st.train_loss_sum = meta.json.value("train_loss_sum", 0.0);
  st.run_id = meta.json.value("run_id", std::string());  // a resumed run goes on as the same run
  if (meta.json.contains("best_model")) st.best_model = meta.json.at("best_model");
  // A checkpoint saved without fp16 resumes an fp16 run at the initial scale, and the other way round
  // the saved scale is not needed; optimizer_steps is below step by the fp16 steps skipped.
  eng.restore(meta.json.value("optimizer_steps", st.step));
  if (tr.loss_scaler().enabled() && meta.json.contains("loss_scaler")) {
    tr.loss_scaler().restore(meta.json.at("loss_scaler"), meta.path);
  }
  return st;
}

}  // namespace

std::string check_checkpoint(const std::string& dir, Trainer& tr, std::ostream& log) {
  std::string warning;
  const std::string mine = check_local(dir, tr, warning);
  const std::string agreed = first_error(tr.plan().host_world(), mine);
  if (agreed.empty() && !warning.empty()) log << "warning: " << warning << std::endl;
  return agreed;
}

CheckpointState load_checkpoint(const std::string& dir, Trainer& tr, std::ostream& log) {
  const std::string err = check_checkpoint(dir, tr, log);
  if (!err.empty()) throw FormatError("checkpoint '" + dir + "' cannot be used: " + err);
  CheckpointState st = read_state(dir, tr);
  tr.plan().host_world().barrier();
  return st;
}

ResumePoint resume_checkpoint(const OutputDirConfig& cfg, Trainer& tr, std::ostream& log) {
  const std::string& spec = cfg.resume_from_checkpoint;
  if (spec != "true" && spec != "True") return {spec, load_checkpoint(spec, tr, log)};
  Communicator& world = tr.plan().host_world();  // host buffers: MPI even where collectives run on NCCL
  // Rank 0 lists output_dir and every rank walks its list: all ranks try the same checkpoints in order.
  std::string listing;
  if (world.rank() == 0) {
    std::vector<std::pair<long, std::string>> found;
    std::error_code ec;
    if (fs::is_directory(cfg.output_dir, ec)) {
      for (const auto& e : fs::directory_iterator(cfg.output_dir, ec)) {
        const std::string n = e.path().filename().string();
        if (e.is_directory(ec) && n.rfind("checkpoint-", 0) == 0 && n.find(".tmp") == std::string::npos) {
          found.emplace_back(std::atol(n.c_str() + 11), e.path().string());
        }
      }
    }
    std::sort(found.rbegin(), found.rend());  // newest first
    for (const auto& f : found) listing += f.second + "\n";
  }
  listing = broadcast_text(world, listing, 0);
  std::istringstream dirs(listing);
  std::string skipped;
  for (std::string dir; std::getline(dirs, dir);) {
    const std::string err = check_checkpoint(dir, tr, log);
    if (err.empty()) {
      ResumePoint p{dir, read_state(dir, tr)};
      world.barrier();
      return p;
    }
    log << "resume: skipping damaged " << dir << ": " << err << std::endl;
    skipped += "\n  " + dir + ": " + err;
  }
  if (skipped.empty()) {
    throw ConfigError("resume_from_checkpoint: true, but output_dir '" + cfg.output_dir + "' holds no checkpoint");
  }
  throw FormatError("resume_from_checkpoint: true, but no checkpoint in output_dir '" + cfg.output_dir +
                    "' verifies:" + skipped);
}

void verify_checkpoint(const std::string& dir) { verify_checkpoint_files(read_checkpoint_meta(dir)); }

}  // namespace shardft
