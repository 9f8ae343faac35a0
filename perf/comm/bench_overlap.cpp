// Does communication overlap compute? One ZeRO-3 step over all ranks on a model whose traffic shows
// (hidden 512, intermediate 1536, 8 / 4 heads, 4 layers, vocab 272: 12.7M parameters, 3 x 51 MB of
// collectives per step; one 128-token sequence per rank), four ways:
//   overlap/.../step           the step as `shardft train` runs it: gradient buckets reduce-scattered
//                              while backward goes on, the next block's weights gathered during compute
//   overlap/.../step_blocking  the same step with each gradient bucket waited for as soon as it starts
//                              (the reduction before overlap; the stage-3 prefetch stays)
//   overlap/.../compute_only   the same step and sharding with every collective a no-op: what the step
//                              would cost on an infinitely fast network
//   overlap/.../comm_only      the collectives that step issues (recorded from it: kind, size, order),
//                              replayed back to back, each waited for, on scratch buffers
// Overlap pays when step < compute_only + comm_only (perf/README.md has the numbers and why this
// machine cannot show it: its MPI moves data with the very cores that compute). This VM's speed also
// drifts 20-30 % over minutes, which makes rows measured a minute apart hard to add up, so
//   overlap/.../paired         runs all of them in every iteration, one step each, interleaved:
//                              compute-only, the replayed collectives, overlapped and blocking steps
//                              over MPI, and an overlapped step over a modeled link that carries data
//                              without the CPU (as NCCL over NVLink or an RDMA NIC does): each
//                              collective a no-op on the data that completes when a 1 GB/s wire,
//                              taking one collective after another, would have carried this rank's
//                              bytes; waiting for it sleeps. Counters: each variant's mean in ms,
//                              `excess_ms` = step - compute - comm (< 0: the overlap pays), and
//                              `link_hidden` = the share of the link's wire time the step hid.
// Run under mpirun (see bench_collectives.cpp).
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "train/trainer.hpp"

namespace shardft {
namespace {

MpiCommunicator& bench_world() {
  static MpiCommunicator w(MPI_COMM_WORLD, "world");
  return w;
}

// Forwards to MPI and, while `recording`, notes each collective so comm_only can replay it.
class RecordingCommunicator : public Communicator {
 public:
  struct Op {
    Collective kind;
    std::size_t count;  // the count argument the engine passed
    DType type;
    ReduceOp op;
  };
  explicit RecordingCommunicator(MpiCommunicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const std::string& name() const override { return inner_.name(); }
  const char* backend() const override { return inner_.backend(); }
  RequestPtr iall_reduce(const void* s, void* r, std::size_t n, DType t, ReduceOp op) override {
    note(Collective::all_reduce, n, t, op);
    return inner_.iall_reduce(s, r, n, t, op);
  }
  RequestPtr ireduce_scatter(const void* s, void* r, std::size_t n, DType t, ReduceOp op) override {
    note(Collective::reduce_scatter, n, t, op);
    return inner_.ireduce_scatter(s, r, n, t, op);
  }
  RequestPtr iall_gather(const void* s, void* r, std::size_t n, DType t) override {
    note(Collective::all_gather, n, t, ReduceOp::sum);
    return inner_.iall_gather(s, r, n, t);
  }
  RequestPtr ibroadcast(void* b, std::size_t n, DType t, int root) override {
    note(Collective::broadcast, n, t, ReduceOp::sum);
    return inner_.ibroadcast(b, n, t, root);
  }
  RequestPtr iall_to_all(const void* s, void* r, std::size_t n, DType t) override {
    note(Collective::all_to_all, n, t, ReduceOp::sum);
    return inner_.iall_to_all(s, r, n, t);
  }
  void barrier() override { inner_.barrier(); }
  ByteLedger& ledger() override { return inner_.ledger(); }

  bool recording = false;
  std::vector<Op> ops;

 private:
  void note(Collective c, std::size_t n, DType t, ReduceOp op) {
    if (recording) ops.push_back({c, n, t, op});
  }
  MpiCommunicator& inner_;
};

// The same ranks with no wire: every collective returns at once. A reduce-scatter zeroes its output
// (a shard: cheap) so that the optimizer sees finite gradients; gathers leave their buffers as they are.
class NoCommCommunicator : public Communicator {
 public:
  explicit NoCommCommunicator(const Communicator& like) : rank_(like.rank()), size_(like.size()) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  const char* backend() const override { return "none"; }
  RequestPtr iall_reduce(const void*, void*, std::size_t, DType, ReduceOp) override { return done(); }
  RequestPtr ireduce_scatter(const void*, void* r, std::size_t n, DType t, ReduceOp) override {
    std::memset(r, 0, n * dtype_size(t));
    return done();
  }
  RequestPtr iall_gather(const void*, void*, std::size_t, DType) override { return done(); }
  RequestPtr ibroadcast(void*, std::size_t, DType, int) override { return done(); }
  RequestPtr iall_to_all(const void*, void*, std::size_t, DType) override { return done(); }
  void barrier() override {}
  ByteLedger& ledger() override { return ledger_; }

 private:
  static RequestPtr done() { return completed_request(); }
  int rank_, size_;
  std::string name_ = "nocomm";
  ByteLedger ledger_;
};

// A wire that needs no CPU: every collective is a no-op on the data (a reduce-scatter zeroes its
// output, as above) and completes when a link of `bytes_per_s`, carrying one collective after
// another, would have sent this rank's bus bytes (the ledger's count). wait() sleeps until then,
// leaving the core idle, as a rank blocked on a DMA-driven transfer does.
class ModeledLinkCommunicator : public Communicator {
 public:
  using Clock = std::chrono::steady_clock;
  ModeledLinkCommunicator(const Communicator& like, double bytes_per_s)
      : rank_(like.rank()), size_(like.size()), bytes_per_s_(bytes_per_s) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  const char* backend() const override { return "modeled link"; }
  RequestPtr iall_reduce(const void*, void*, std::size_t n, DType t, ReduceOp) override {
    return carry(Collective::all_reduce, double(n) * dtype_size(t));
  }
  RequestPtr ireduce_scatter(const void*, void* r, std::size_t n, DType t, ReduceOp) override {
    std::memset(r, 0, n * dtype_size(t));
    return carry(Collective::reduce_scatter, double(n) * size_ * dtype_size(t));
  }
  RequestPtr iall_gather(const void*, void*, std::size_t n, DType t) override {
    return carry(Collective::all_gather, double(n) * size_ * dtype_size(t));
  }
  RequestPtr ibroadcast(void*, std::size_t n, DType t, int) override {
    return carry(Collective::broadcast, double(n) * dtype_size(t));
  }
  RequestPtr iall_to_all(const void*, void*, std::size_t n, DType t) override {
    return carry(Collective::all_to_all, double(n) * size_ * dtype_size(t));
  }
  void barrier() override {}
  ByteLedger& ledger() override { return ledger_; }
  double wire_seconds() const { return wire_seconds_; }  // all collectives so far, back to back

 private:
  struct OnTheWire : Request {
    explicit OnTheWire(Clock::time_point t) : done_at(t) {}
    void wait() override { std::this_thread::sleep_until(done_at); }
    bool test() override { return Clock::now() >= done_at; }
    Clock::time_point done_at;
  };
  RequestPtr carry(Collective c, double total_bytes) {
    const double bytes = bus_bytes(c, total_bytes, size_);
    ledger_.record(c, bytes);
    const double seconds = bytes / bytes_per_s_;
    wire_seconds_ += seconds;
    link_free_at_ = std::max(link_free_at_, Clock::now()) +
                    std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    return std::make_unique<OnTheWire>(link_free_at_);
  }
  int rank_, size_;
  double bytes_per_s_, wire_seconds_ = 0;
  Clock::time_point link_free_at_{};
  std::string name_ = "modeled_link";
  ByteLedger ledger_;
};

constexpr double kModeledLinkBytesPerSecond = 1e9;

TrainConfig overlap_config() {
  TrainConfig cfg;
  cfg.model.hidden_size = 512;
  cfg.model.intermediate_size = 1536;
  cfg.model.num_attention_heads = 8;
  cfg.model.num_key_value_heads = 4;
  cfg.model.num_hidden_layers = 4;
  cfg.model.max_position_embeddings = 128;
  cfg.max_seq_length = 128;
  cfg.per_device_train_batch_size = 1;
  cfg.zero_stage = 3;
  return cfg;  // reduce_bucket_size / allgather_bucket_size "auto": what train uses by default
}

TokenBatch random_sequence(int seq, unsigned seed) {
  TokenBatch b;
  b.batch = 1;
  b.seq = seq;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int t = 0; t < seq; ++t) {
    b.input_ids.push_back(byte(rng));
    b.position_ids.push_back(t);
    b.seq_ids.push_back(0);
  }
  for (int t = 0; t < seq; ++t) b.targets.push_back(t + 1 < seq ? b.input_ids[t + 1] : kIgnoreIndex);
  b.real_tokens = seq;
  return b;
}

// Wall time of fn on the slowest rank, all ranks started together.
template <class Fn>
double timed(Fn&& fn) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  fn();
  double elapsed = MPI_Wtime() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return elapsed;
}

using RecordedOps = std::vector<RecordingCommunicator::Op>;

// The collectives one step issues (after a warm-up step), in order.
RecordedOps record_step_collectives(MpiCommunicator& world) {
  RecordingCommunicator recorder(world);
  Trainer tr(overlap_config(), 1000000, recorder);
  const TokenBatch mb = random_sequence(128, 1000u + static_cast<unsigned>(world.rank()));
  tr.step({mb});
  recorder.recording = true;
  tr.step({mb});
  return recorder.ops;
}

// The largest buffer any of them reads or writes, in bytes.
std::size_t largest_buffer(const RecordedOps& ops, int ranks) {
  std::size_t most = 0;
  for (const auto& op : ops) {
    const bool whole = op.kind == Collective::all_reduce || op.kind == Collective::broadcast;
    most = std::max(most, op.count * dtype_size(op.type) * (whole ? 1 : ranks));
  }
  return most;
}

// Runs them back to back on c, each waited for.
void replay(const RecordedOps& ops, Communicator& c, void* send, void* recv) {
  for (const auto& op : ops) {
    switch (op.kind) {
      case Collective::all_reduce: c.all_reduce(send, recv, op.count, op.type, op.op); break;
      case Collective::reduce_scatter: c.reduce_scatter(send, recv, op.count, op.type, op.op); break;
      case Collective::all_gather: c.all_gather(send, recv, op.count, op.type); break;
      case Collective::broadcast: c.broadcast(recv, op.count, op.type, 0); break;
      case Collective::all_to_all: c.all_to_all(send, recv, op.count, op.type); break;
    }
  }
}

enum class Mode { overlap, blocking, compute_only };

void overlap_step(benchmark::State& state, Mode mode) {
  MpiCommunicator& world = bench_world();
  RecordingCommunicator recorder(world);
  NoCommCommunicator nowire(world);
  Communicator& group = mode == Mode::compute_only ? static_cast<Communicator&>(nowire) : recorder;
  Trainer tr(overlap_config(), 1000000, group);
  tr.engine().set_overlap_comm(mode != Mode::blocking);
  const TokenBatch mb = random_sequence(128, 1000u + static_cast<unsigned>(world.rank()));
  tr.step({mb});  // warm-up: the decoder sizes its buffers
  double bytes = 0;
  const GradBuckets& buckets = *tr.engine().grad_buckets();
  const std::int64_t started = buckets.started(), hidden = buckets.completed_during_compute();
  for (auto _ : state) {
    StepStats st;
    state.SetIterationTime(timed([&] { st = tr.step({mb}); }));
    bytes += st.comm_bytes;
  }
  // Of the gradient buckets, the share found complete while backward (or the next forward) computed.
  if (mode != Mode::compute_only) {
    state.counters["buckets_per_step"] = static_cast<double>(buckets.started() - started) / state.iterations();
    state.counters["buckets_done_in_compute"] =
        static_cast<double>(buckets.completed_during_compute() - hidden) / static_cast<double>(buckets.started() - started);
  }
  state.counters["ranks"] = world.size();
  state.counters["comm_bytes_per_step"] = bytes / static_cast<double>(state.iterations());
  state.SetLabel(mode == Mode::overlap ? "buckets overlapped" : mode == Mode::blocking ? "buckets blocking" : "no collectives");
}

void comm_only(benchmark::State& state) {
  MpiCommunicator& world = bench_world();
  const RecordedOps ops = record_step_collectives(world);
  std::vector<char> send(largest_buffer(ops, world.size()), 0), recv(send.size(), 0);  // zeros: valid in every type
  const double before = world.ledger().total();
  for (auto _ : state) state.SetIterationTime(timed([&] { replay(ops, world, send.data(), recv.data()); }));
  state.counters["ranks"] = world.size();
  state.counters["collectives_per_step"] = static_cast<double>(ops.size());
  state.counters["comm_bytes_per_step"] = (world.ledger().total() - before) / static_cast<double>(state.iterations());
  state.SetLabel("the step's collectives, replayed blocking");
}

void paired(benchmark::State& state) {
  MpiCommunicator& world = bench_world();
  NoCommCommunicator nowire(world);
  ModeledLinkCommunicator link(world, kModeledLinkBytesPerSecond);
  Trainer compute(overlap_config(), 1000000, nowire), overlapped(overlap_config(), 1000000, world),
      blocking(overlap_config(), 1000000, world), over_link(overlap_config(), 1000000, link);
  blocking.engine().set_overlap_comm(false);
  const RecordedOps ops = record_step_collectives(world);
  std::vector<char> send(largest_buffer(ops, world.size()), 0), recv(send.size(), 0);
  const TokenBatch mb = random_sequence(128, 1000u + static_cast<unsigned>(world.rank()));
  for (Trainer* t : {&compute, &overlapped, &blocking, &over_link}) t->step({mb});  // warm-up
  double c = 0, m = 0, s = 0, b = 0, l = 0, wire = 0;
  for (auto _ : state) {
    c += timed([&] { compute.step({mb}); });
    m += timed([&] { replay(ops, world, send.data(), recv.data()); });
    const double step = timed([&] { overlapped.step({mb}); });
    s += step;
    b += timed([&] { blocking.step({mb}); });
    const double before = link.wire_seconds();
    l += timed([&] { over_link.step({mb}); });
    wire += link.wire_seconds() - before;
    state.SetIterationTime(step);
  }
  const double n = static_cast<double>(state.iterations()), ms = 1e3 / n;
  state.counters["compute_ms"] = c * ms;
  state.counters["comm_ms"] = m * ms;
  state.counters["step_ms"] = s * ms;
  state.counters["step_blocking_ms"] = b * ms;
  state.counters["excess_ms"] = (s - c - m) * ms;
  state.counters["link_step_ms"] = l * ms;
  state.counters["link_wire_ms"] = wire * ms;
  state.counters["link_hidden"] = (c + wire - l) / wire;
  state.counters["ranks"] = world.size();
  state.SetLabel("time: the overlapped step over MPI");
}

const bool registered = [] {
  const std::string base = "overlap/zero3_h512_L4/B1_T128/";
  for (auto [name, mode] : {std::pair<const char*, Mode>{"step", Mode::overlap}, {"step_blocking", Mode::blocking},
                            {"compute_only", Mode::compute_only}}) {
    benchmark::RegisterBenchmark((base + name).c_str(), [mode = mode](benchmark::State& s) { overlap_step(s, mode); })
        ->Iterations(8)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark((base + "comm_only").c_str(), comm_only)
      ->Iterations(8)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark((base + "paired").c_str(), paired)
      ->Iterations(6)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace
}  // namespace shardft
