// Checkpoint throughput under mpirun: save and load of the full training state (fp32 master + two
// AdamW moments = 12 bytes per parameter) of a ~110M-parameter Llama (hidden 768, 12 layers,
// vocab 32000, tied), and the peak memory of consolidating it to safetensors in a child process.
// Counters: GB/s of the whole checkpoint (all ranks), and consolidate_peak_rss_bytes against the
// largest tensor. (Run as a process of its own, `shardft consolidate` of this checkpoint peaks at
// 115 MB resident, largest tensor 98 MB.) Files go to $SHARDFT_BENCH_DIR or /tmp.
#include <benchmark/benchmark.h>
#include <mpi.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "config/recipe_sections.hpp"
#include "comm/mpi_communicator.hpp"
#include "train/checkpoint.hpp"
#include "tools/consolidate.hpp"

namespace shardft {
namespace {

TrainConfig model_110m(const std::string& dir) {
  TrainConfig cfg;
  cfg.model.vocab_size = 32000;
  cfg.model.hidden_size = 768;
  cfg.model.num_hidden_layers = 12;
  cfg.model.num_attention_heads = 12;
  cfg.model.num_key_value_heads = 12;
  cfg.model.intermediate_size = 2048;
  cfg.zero_stage = 3;
  cfg.output_dir = dir;
  return cfg;
}

std::string bench_dir() {
  const char* d = std::getenv("SHARDFT_BENCH_DIR");
  return std::string(d ? d : "/tmp") + "/shardft-bench-ckpt";
}

long vm_kb(const char* key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(std::strlen(key)));
  }
  return -1;
}

// Consolidates in a forked child and returns how much its resident memory grew at the peak: the
// child starts with the parent's pages, so its high-water mark is reset (clear_refs 5) and the
// growth over its starting RSS is what consolidation itself needed.
long consolidate_extra_peak_rss(const std::string& checkpoint, const std::string& out) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::ofstream("/proc/self/clear_refs") << "5";
    const long start = vm_kb("VmRSS:");
    ConsolidateOptions opt;
    opt.output_dir = out;
    consolidate_checkpoint(checkpoint, opt, std::cerr);
    const long grew = (vm_kb("VmHWM:") - start) * 1024;
    if (write(fds[1], &grew, sizeof grew) != sizeof grew) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  long grew = -1;
  if (read(fds[0], &grew, sizeof grew) != sizeof grew) grew = -1;
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return grew;
}

void BM_Checkpoint110M(benchmark::State& state) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  const std::string dir = bench_dir();
  const TrainConfig cfg = model_110m(dir);
  Trainer tr(cfg, 1, world);
  const double bytes = 12.0 * static_cast<double>(tr.model().layout().total_numel());
  double save_s = 0, load_s = 0, verify_s = 0;
  std::string saved;
  for (auto _ : state) {
    world.barrier();
    double t0 = MPI_Wtime();
    saved = save_checkpoint(checkpoint_config(cfg), tr, {1, 0.0, "bench"});
    double ts = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &ts, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    world.barrier();
    t0 = MPI_Wtime();
    load_checkpoint(saved, tr, std::cerr);  // verifies the files it reads, then reads them
    double tl = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &tl, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    world.barrier();
    t0 = MPI_Wtime();
    const std::string damage = check_checkpoint(saved, tr, std::cerr);  // the verification part of the load
    double tv = MPI_Wtime() - t0;
    if (!damage.empty()) state.SkipWithError(damage.c_str());
    MPI_Allreduce(MPI_IN_PLACE, &tv, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    save_s += ts;
    load_s += tl;
    verify_s += tv;
    state.SetIterationTime(ts + tl);
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["parameters"] = static_cast<double>(tr.model().layout().total_numel());
  state.counters["checkpoint_bytes"] = bytes;
  state.counters["save_GBps"] = bytes / (save_s / n) / 1e9;
  state.counters["load_GBps"] = bytes / (load_s / n) / 1e9;  // verification included
  state.counters["verify_GBps"] = bytes / (verify_s / n) / 1e9;  // metadata seal + every checksum a rank reads
  if (world.rank() == 0) {
    state.counters["consolidate_extra_peak_bytes"] = static_cast<double>(consolidate_extra_peak_rss(saved, dir + "/hf"));
    state.counters["largest_tensor_bytes"] = 4.0 * 32000 * 768;
    state.counters["model_fp32_bytes"] = 4.0 * static_cast<double>(tr.model().layout().total_numel());
    std::filesystem::remove_all(dir);
  }
  world.barrier();
}
BENCHMARK(BM_Checkpoint110M)->Iterations(2)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace shardft
