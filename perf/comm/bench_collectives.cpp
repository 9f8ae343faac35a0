// Collective and data-parallel step benchmarks, run under mpirun: every rank runs the same
// benchmarks with a fixed iteration count (collectives must stay in lockstep), rank 0 reports.
// Like nccl-tests, each collective reports per size: time, algbw = bytes / time and
// busbw = algbw x the collective's bus factor (all-reduce 2(n-1)/n; reduce-scatter, all-gather,
// all-to-all, broadcast (n-1)/n), so numbers compare across rank counts.
//   mpirun -np 2 build/perf/shardft_comm_bench --benchmark_format=json
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "comm/quantized_collectives.hpp"
#include "parallel/parallel_plan.hpp"
#include "comm/self_communicator.hpp"
#include "kernels/gemm.hpp"
#include "config/recipe_sections.hpp"
#include "train/trainer.hpp"

namespace shardft {
namespace {

MpiCommunicator& world() {
  static MpiCommunicator w(MPI_COMM_WORLD, "world");
  return w;
}

double bus_factor(Collective c, int n) { return n > 1 ? bus_bytes(c, 1.0, n) : 0.0; }

// bytes: the full payload (what nccl-tests calls size).
void run_collective(benchmark::State& state, Collective c) {
  auto& comm = world();
  const int n = comm.size();
  const std::size_t bytes = static_cast<std::size_t>(state.range(0));
  const std::size_t count = bytes / sizeof(float);
  std::vector<float> send(count, 1.0f), recv(count, 0.0f);
  const std::size_t block = count / n;
  for (auto _ : state) {
    comm.barrier();
    const double t0 = MPI_Wtime();
    switch (c) {
      case Collective::all_reduce: comm.all_reduce(send.data(), recv.data(), count, DType::f32, ReduceOp::sum); break;
      case Collective::reduce_scatter: comm.reduce_scatter(send.data(), recv.data(), block, DType::f32, ReduceOp::sum); break;
      case Collective::all_gather: comm.all_gather(send.data(), recv.data(), block, DType::f32); break;
      case Collective::broadcast: comm.broadcast(send.data(), count, DType::f32, 0); break;
      case Collective::all_to_all: comm.all_to_all(send.data(), recv.data(), block, DType::f32); break;
    }
    double elapsed = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);  // the slowest rank
    state.SetIterationTime(elapsed);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes));
  state.counters["size_bytes"] = static_cast<double>(bytes);
  state.counters["ranks"] = n;
  state.counters["algbw_GBps"] = benchmark::Counter(static_cast<double>(bytes) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["busbw_GBps"] = benchmark::Counter(static_cast<double>(bytes) * bus_factor(c, n) / 1e9,
                                                    benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(collective_name(c)) + "/" + comm.backend());
}

void BM_AllReduce(benchmark::State& s) { run_collective(s, Collective::all_reduce); }
void BM_ReduceScatter(benchmark::State& s) { run_collective(s, Collective::reduce_scatter); }
void BM_AllGather(benchmark::State& s) { run_collective(s, Collective::all_gather); }
void BM_Broadcast(benchmark::State& s) { run_collective(s, Collective::broadcast); }
void BM_AllToAll(benchmark::State& s) { run_collective(s, Collective::all_to_all); }

#define SHARDFT_COLLECTIVE(fn) \
  BENCHMARK(fn)->RangeMultiplier(16)->Range(4096, 64 << 20)->Iterations(20)->UseManualTime()->Unit(benchmark::kMicrosecond)
SHARDFT_COLLECTIVE(BM_AllReduce);
SHARDFT_COLLECTIVE(BM_ReduceScatter);
SHARDFT_COLLECTIVE(BM_AllGather);
SHARDFT_COLLECTIVE(BM_Broadcast);
SHARDFT_COLLECTIVE(BM_AllToAll);

// ZeRO++'s compressed collectives beside the plain ones at the same payload (bytes of fp32 data):
// the int8 all-gather (qwZ) and the int4 hierarchical reduce-scatter (qgZ; ranks split into 2 nodes
// when the count is even, so both hops run). bytes_on_wire_per_rank: what this rank sent.
void BM_QuantizedAllGatherInt8(benchmark::State& state) {
  auto& comm = world();
  const int n = comm.size();
  const std::size_t count = static_cast<std::size_t>(state.range(0)) / sizeof(float) / n;
  std::vector<float> shard(count, 0.5f), full(count * n);
  const double before = comm.ledger().total();
  for (auto _ : state) {
    comm.barrier();
    const double t0 = MPI_Wtime();
    iquantized_all_gather_int8(comm, shard.data(), count, full.data(), 64)->wait();
    double elapsed = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    state.SetIterationTime(elapsed);
  }
  state.counters["size_bytes"] = static_cast<double>(state.range(0));
  state.counters["bytes_on_wire_per_rank"] = (comm.ledger().total() - before) / static_cast<double>(state.iterations());
  state.SetLabel("qwZ int8/" + std::string(comm.backend()));
}

void BM_QuantizedReduceScatterInt4(benchmark::State& state) {
  auto& comm = world();
  const int n = comm.size();
  static const ParallelPlan groups = [&] {
    ParallelConfig qgz;
    qgz.zero_quantized_gradients = true;
    qgz.ranks_per_node = n % 2 == 0 && n > 2 ? n / 2 : 1;
    return ParallelPlan::create(MPI_COMM_WORLD, qgz);
  }();
  const std::size_t shard = static_cast<std::size_t>(state.range(0)) / sizeof(float) / n;
  std::vector<float> full(shard * n, 0.25f), out(shard);
  const double before = groups.qgz_intra()->ledger().total() + groups.qgz_cross()->ledger().total();
  for (auto _ : state) {
    comm.barrier();
    const double t0 = MPI_Wtime();
    quantized_reduce_scatter_int4(*groups.qgz_intra(), *groups.qgz_cross(), full.data(), shard, out.data(), 64);
    double elapsed = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    state.SetIterationTime(elapsed);
  }
  state.counters["size_bytes"] = static_cast<double>(state.range(0));
  state.counters["bytes_on_wire_per_rank"] =
      (groups.qgz_intra()->ledger().total() + groups.qgz_cross()->ledger().total() - before) / static_cast<double>(state.iterations());
  state.SetLabel("qgZ int4/" + std::string(comm.backend()));
}

BENCHMARK(BM_QuantizedAllGatherInt8)->RangeMultiplier(16)->Range(65536, 16 << 20)->Iterations(20)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QuantizedReduceScatterInt4)->RangeMultiplier(16)->Range(65536, 16 << 20)->Iterations(20)->UseManualTime()->Unit(benchmark::kMicrosecond);

// One optimizer step of the default model per ZeRO stage over all ranks: tokens/s of the whole job
// and bytes each rank sent.
void BM_TrainStepPerStage(benchmark::State& state) {
  auto& comm = world();
  TrainConfig cfg;
  cfg.zero_stage = static_cast<int>(state.range(0));
  cfg.per_device_train_batch_size = 16;
  ByteTokenizer tok;
  std::vector<TokenizedSample> samples;
  for (int i = 0; i < 16; ++i) {
    std::string w;
    for (int k = 0; k < 3 + i % 4; ++k) w += char('a' + (i * 7 + k * 5) % 26);
    std::string up = w;
    for (char& ch : up) ch = char(ch - 32);
    samples.push_back(apply_chat_template(tok, {{"user", "upper: " + w}, {"assistant", up}}, 64));
  }
  std::vector<std::int64_t> idx(16);
  for (int i = 0; i < 16; ++i) idx[i] = i;
  const TokenBatch mb = collate(samples, idx);
  Trainer tr(cfg, 1000000, comm);
  tr.step({mb});  // warm-up: allocations
  double bytes = 0;
  std::int64_t tokens = 0;
  for (auto _ : state) {
    comm.barrier();
    const double t0 = MPI_Wtime();
    const StepStats st = tr.step({mb});
    double elapsed = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    state.SetIterationTime(elapsed);
    bytes += st.comm_bytes;
    tokens += st.tokens;
  }
  state.counters["ranks"] = comm.size();
  state.counters["tokens_per_second"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["comm_bytes_per_step"] = bytes / static_cast<double>(state.iterations());
}
BENCHMARK(BM_TrainStepPerStage)->DenseRange(0, 3)->Iterations(30)->UseManualTime()->Unit(benchmark::kMillisecond);

// Only rank 0 prints; the others still run every benchmark in step.
class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace
}  // namespace shardft

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int result = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    shardft::gemm_set_num_threads(1);
    // Only rank 0 writes --benchmark_out; the other ranks must not even open (and truncate) it.
    std::vector<char*> args(argv, argv + argc);
    if (shardft::world().rank() != 0) {
      args.erase(std::remove_if(args.begin() + 1, args.end(),
                                [](char* a) { return std::string(a).rfind("--benchmark_out", 0) == 0; }),
                 args.end());
    }
    int nargs = static_cast<int>(args.size());
    benchmark::Initialize(&nargs, args.data());
    if (shardft::world().rank() == 0) {
      benchmark::RunSpecifiedBenchmarks();
    } else {
      shardft::SilentReporter silent;
      benchmark::RunSpecifiedBenchmarks(&silent);
    }
    benchmark::Shutdown();
  }
  MPI_Finalize();
  return result;
}
