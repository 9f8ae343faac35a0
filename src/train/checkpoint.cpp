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

#include "io/hdf5_shard.hpp"
#include "train/hf_export.hpp"

namespace fs = std::filesystem;

namespace shardft {

namespace {

const char* kFormat = "shardft-checkpoint-1";
const char* kStates[] = {"master", "exp_avg", "exp_avg_sq"};

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

nlohmann::json read_metadata(const std::string& dir) {
  const std::string path = dir + "/metadata.json";
  std::ifstream in(path);
  if (!in) throw FormatError("checkpoint '" + dir + "': metadata.json is missing (an interrupted save?)");
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw FormatError(path + ": not valid JSON (" + e.what() + ")");
  }
  if (meta.value("format", "") != kFormat) throw FormatError(path + ": not a " + std::string(kFormat) + " checkpoint");
  return meta;
}

// Test hook: SHARDFT_CRASH_IN_SAVE=RANK:STEP kills that rank while it saves checkpoint-STEP, after its
// shard is written and before the checkpoint is complete, as a power cut would.
void maybe_crash_in_save(int rank, long step) {
  const char* spec = std::getenv("SHARDFT_CRASH_IN_SAVE");
  int r = -1;
  long s = -1;
  if (spec && std::sscanf(spec, "%d:%ld", &r, &s) == 2 && r == rank && s == step) std::_Exit(9);
}

}  // namespace

std::string save_checkpoint(const TrainConfig& cfg, Trainer& tr, const CheckpointState& state) {
  Communicator& world = tr.plan().world();
  ZeroEngine& eng = tr.engine();
  const std::string name = "checkpoint-" + std::to_string(state.step);
  const std::string final_dir = cfg.output_dir + "/" + name, tmp_dir = final_dir + ".tmp";
  if (world.rank() == 0) {
    fs::remove_all(tmp_dir);
    fs::create_directories(tmp_dir);
  }
  world.barrier();

  // Each writing rank: its owned region and the table that places it in layout coordinates.
  const auto slices = eng.owned_slices();
  std::vector<std::int64_t> table;
  for (const auto& s : slices) table.insert(table.end(), {s.layout_offset, s.owned_offset, s.length});
  int writes = eng.writes_checkpoint() ? 1 : 0;
  if (writes) {
    Hdf5ShardWriter w(tmp_dir + "/" + rank_file(world.rank()));
    const Attributes common = {{"full_shape", "[" + std::to_string(tr.model().layout().total_numel()) + "]"},
                               {"stage", std::to_string(cfg.zero_stage)},
                               {"world_size", std::to_string(world.size())},
                               {"shard_group_size", std::to_string(eng.group().size())},
                               {"shard_rank", std::to_string(eng.group().rank())},
                               {"step", std::to_string(state.step)}};
    View1<float> states[] = {eng.master(), eng.exp_avg(), eng.exp_avg_sq()};
    for (int k = 0; k < 3; ++k) {
      auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), states[k]);
      Attributes a = common;
      a["offset"] = "owned region; see 'slices' (layout_offset, owned_offset, length)";
      w.write_f32(kStates[k], host.data(), host.extent(0), a);
    }
    w.write_i64("slices", table.data(), table.size(), common);
    w.close();
  }
  maybe_crash_in_save(world.rank(), state.step);

  // Rank 0 learns every file's slice table, then completes the checkpoint.
  std::vector<int> flags(world.size());
  world.all_gather(&writes, flags.data(), 1, DType::i32);
  std::vector<int> sizes(world.size());
  int my_size = static_cast<int>(table.size());
  world.all_gather(&my_size, sizes.data(), 1, DType::i32);
  const int max_size = *std::max_element(sizes.begin(), sizes.end());
  std::vector<std::int64_t> padded(max_size, -1), all(static_cast<std::size_t>(max_size) * world.size());
  std::copy(table.begin(), table.end(), padded.begin());
  world.all_gather(padded.data(), all.data(), max_size, DType::i64);
  if (world.rank() == 0) {
    const ParamLayout& layout = tr.model().layout();
    nlohmann::json meta = {{"format", kFormat},
                           {"step", state.step},
                           {"train_loss_sum", state.train_loss_sum},
                           {"world_size", world.size()},
                           {"zero_stage", cfg.zero_stage},
                           {"shard_group_size", eng.group().size()},
                           {"total_numel", layout.total_numel()},
                           {"model", model_meta_json(cfg.model)},
                           {"hf_config", read_source_config(cfg.model_name_or_path)},
                           {"config", to_yaml(cfg)}};
    nlohmann::json params = nlohmann::json::array();
    for (std::size_t p = 0; p < layout.params().size(); ++p) {
      params.push_back({{"name", layout.params()[p].name}, {"shape", layout.params()[p].shape},
                        {"layout_offset", layout.offset(static_cast<int>(p))}});
    }
    meta["params"] = params;
    nlohmann::json files = nlohmann::json::array();
    for (int r = 0; r < world.size(); ++r) {
      if (!flags[r]) continue;
      std::vector<std::int64_t> t(all.begin() + static_cast<long>(r) * max_size,
                                  all.begin() + static_cast<long>(r) * max_size + sizes[r]);
      files.push_back({{"file", rank_file(r)}, {"rank", r}, {"slices", t}});
    }
    meta["files"] = files;
    // Like HF Trainer, each checkpoint carries the tokenizer, so an export needs nothing else.
    copy_tokenizer_files(cfg.tokenizer_name_or_path, tmp_dir);
    write_file_atomically(tmp_dir + "/metadata.json", meta.dump(1));
    fsync_path(tmp_dir);
    fs::remove_all(final_dir);
    fs::rename(tmp_dir, final_dir);
    fsync_path(cfg.output_dir);
    write_file_atomically(cfg.output_dir + "/latest", name + "\n");
    if (cfg.save_total_limit > 0) {  // keep the newest save_total_limit complete checkpoints
      std::vector<std::pair<long, fs::path>> found;
      for (const auto& e : fs::directory_iterator(cfg.output_dir)) {
        const std::string n = e.path().filename().string();
        if (e.is_directory() && n.rfind("checkpoint-", 0) == 0 && n.find(".tmp") == std::string::npos) {
          found.emplace_back(std::atol(n.c_str() + 11), e.path());
        }
      }
      std::sort(found.begin(), found.end());
      for (std::size_t i = 0; i + cfg.save_total_limit < found.size(); ++i) fs::remove_all(found[i].second);
    }
  }
  world.barrier();
  return final_dir;
}

CheckpointState load_checkpoint(const std::string& dir, Trainer& tr) {
  Communicator& world = tr.plan().world();
  const nlohmann::json meta = read_metadata(dir);
  const ParamLayout& layout = tr.model().layout();
  const std::string meta_path = dir + "/metadata.json";
  if (meta.at("total_numel").get<std::int64_t>() != layout.total_numel() ||
      meta.at("params").size() != layout.params().size()) {
    throw FormatError(meta_path + ": the checkpoint holds another model (" + meta.at("model").dump() + ")");
  }
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const auto& mp = meta.at("params")[p];
    if (mp.at("name") != layout.params()[p].name || mp.at("shape").get<std::vector<std::int64_t>>() != layout.params()[p].shape) {
      throw FormatError(meta_path + ": parameter '" + mp.at("name").get<std::string>() + "' does not match the recipe's model");
    }
  }
  ZeroEngine& eng = tr.engine();
  View1<float> states[] = {eng.master(), eng.exp_avg(), eng.exp_avg_sq()};
  std::vector<decltype(Kokkos::create_mirror_view(states[0]))> host;
  for (auto& s : states) host.push_back(Kokkos::create_mirror_view(s));
  for (auto& h : host) Kokkos::deep_copy(h, 0.f);
  // For each range this rank owns now, read it from whichever files hold it. Slice tables are parsed
  // once and each file is opened at most once.
  const auto& files = meta.at("files");
  std::vector<std::vector<std::int64_t>> tables;
  for (const auto& f : files) tables.push_back(f.at("slices").get<std::vector<std::int64_t>>());
  std::vector<std::unique_ptr<Hdf5ShardReader>> readers(files.size());
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
          readers[f]->read_f32(kStates[k], static_cast<std::size_t>(t[i + 1] + (lo - t[i])),
                               static_cast<std::size_t>(hi - lo),
                               host[k].data() + mine.owned_offset + (lo - mine.layout_offset));
        }
        covered += hi - lo;
      }
    }
    if (covered != mine.length) {
      throw FormatError(meta_path + ": elements " + std::to_string(mine.layout_offset) + ".." +
                        std::to_string(mine.layout_offset + mine.length) + " are in no rank file (a missing rank file?)");
    }
  }
  for (int k = 0; k < 3; ++k) Kokkos::deep_copy(states[k], host[k]);
  CheckpointState st;
  st.step = meta.at("step").get<long>();
  st.train_loss_sum = meta.value("train_loss_sum", 0.0);
  eng.restore(st.step);
  world.barrier();
  return st;
}

void verify_checkpoint(const std::string& dir) {
  const nlohmann::json meta = read_metadata(dir);
  for (const auto& f : meta.at("files")) {
    const std::string path = dir + "/" + f.at("file").get<std::string>();
    Hdf5ShardReader r(path);
    for (const char* name : {"master", "exp_avg", "exp_avg_sq", "slices"}) r.verify(name);
  }
}

std::string resolve_checkpoint(const TrainConfig& cfg, std::ostream& log) {
  const std::string& spec = cfg.resume_from_checkpoint;
  if (spec != "true" && spec != "True") return spec;
  std::vector<std::pair<long, std::string>> found;
  if (fs::is_directory(cfg.output_dir)) {
    for (const auto& e : fs::directory_iterator(cfg.output_dir)) {
      const std::string n = e.path().filename().string();
      if (e.is_directory() && n.rfind("checkpoint-", 0) == 0 && n.find(".tmp") == std::string::npos) {
        found.emplace_back(std::atol(n.c_str() + 11), e.path().string());
      }
    }
  }
  std::sort(found.rbegin(), found.rend());
  for (const auto& [step, dir] : found) {
    try {
      verify_checkpoint(dir);
      return dir;
    } catch (const FormatError& e) {
      log << "resume: skipping damaged " << dir << ": " << e.what() << std::endl;
    }
  }
  throw ConfigError("resume_from_checkpoint: true, but output_dir '" + cfg.output_dir + "' holds no usable checkpoint");
}

bool checkpoint_due(const TrainConfig& cfg, long step, long steps_per_epoch, long total_steps) {
  const bool last = step == total_steps;
  if (cfg.save_strategy == "epoch") return last || (steps_per_epoch > 0 && step % steps_per_epoch == 0);
  if (cfg.save_strategy == "steps") return last || (cfg.save_steps > 0 && step % cfg.save_steps == 0);
  return false;
}

}  // namespace shardft
