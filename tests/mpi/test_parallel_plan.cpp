// The parallel plan's groups on a real MPI job (who is in each, which backend, which cross nodes), and
// the collective timeout: a rank that does not join a collective is reported by every rank waiting for
// it, naming the rank, the group and the collective.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator_factory.hpp"
#include "comm/mpi_communicator.hpp"
#include "parallel/parallel_plan.hpp"
#include "config/recipe_sections.hpp"

namespace shardft {
namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// The sum of world ranks over a group names its members.
int member_sum(Communicator& c) {
  int s = world_rank();
  c.all_reduce(&s, &s, 1, DType::i32, ReduceOp::sum);
  return s;
}

TEST(ParallelPlanGroups, ShardReplicaAndZeroPlusPlusGroupsTileTheWorld) {
  const int n = world_size(), r = world_rank();
  const int f = n % 2 == 0 ? std::max(1, n / 2) : n;
  TrainConfig cfg;
  cfg.ranks_per_node = f;  // a node per shard group: HYBRID_SHARD's layout
  cfg.sharding_strategy = "HYBRID_SHARD";
  cfg.zero_stage = 3;
  cfg.zero_hpz_partition_size = f % 2 == 0 ? 2 : 1;
  cfg.zero_quantized_gradients = true;
  const ParallelPlan p = ParallelPlan::create(MPI_COMM_WORLD, parallel_config(cfg));
  EXPECT_EQ(p.dims().shard, f);
  EXPECT_EQ(p.dims().replicas, n / f);
  EXPECT_EQ(p.shard().size(), f);
  EXPECT_EQ(p.shard().rank(), r % f);
  const int first = (r / f) * f;
  EXPECT_EQ(member_sum(p.shard()), f * first + f * (f - 1) / 2);
  EXPECT_FALSE(p.shard().ledger().crosses_nodes());
  if (n / f > 1) {
    ASSERT_NE(p.replica(), nullptr);
    EXPECT_EQ(p.replica()->size(), n / f);
    EXPECT_EQ(p.replica()->rank(), r / f);
    EXPECT_TRUE(p.replica()->ledger().crosses_nodes());
    int want = 0;
    for (int k = r % f; k < n; k += f) want += k;
    EXPECT_EQ(member_sum(*p.replica()), want);
  } else {
    EXPECT_EQ(p.replica(), nullptr);
  }
  if (cfg.zero_hpz_partition_size > 1) {
    ASSERT_NE(p.hpz(), nullptr);
    EXPECT_EQ(p.hpz()->size(), 2);
    EXPECT_EQ(member_sum(*p.hpz()), 2 * (r / 2 * 2) + 1);
  }
  ASSERT_NE(p.qgz_intra(), nullptr);
  EXPECT_EQ(p.qgz_intra()->size() * p.qgz_cross()->size(), f);
  EXPECT_EQ(p.shard().rank(), p.qgz_cross()->rank() * p.qgz_intra()->size() + p.qgz_intra()->rank());
  // Every group runs on the backend `auto` picks for this build.
  const std::string backend = backend_name(choose_collectives("auto", this_build()));
  for (Communicator* c : p.communicators()) EXPECT_EQ(std::string(c->backend()), backend) << c->name();
  const std::string report = p.report();
  EXPECT_NE(report.find("shard  : " + std::to_string(n / f) + " group" + (n / f == 1 ? "" : "s") + " of " +
                        std::to_string(f) + " (" + backend),
            std::string::npos)
      << report;
}

TEST(ParallelPlanGroups, ABadLayoutFailsOnEveryRankWithTheSameError) {
  const int n = world_size();
  TrainConfig cfg;
  cfg.shard_group_size = n + 1;
  try {
    ParallelPlan::create(MPI_COMM_WORLD, parallel_config(cfg));
    FAIL() << "shard_group_size " << n + 1 << " accepted at " << n << " ranks";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("shard_group_size " + std::to_string(n + 1) + " does not divide the " +
                                         std::to_string(n) + " ranks"),
              std::string::npos)
        << e.what();
  }
  cfg.shard_group_size = 0;
  cfg.collectives = "nccl";
  if (!this_build().compute_memory_on_host) GTEST_SKIP() << "a GPU build: nccl is a valid choice here";
  EXPECT_THROW(ParallelPlan::create(MPI_COMM_WORLD, parallel_config(cfg)), ConfigError);
}

// Rank 1 joins each collective late; every other rank's wait passes the limit and reports it, then
// (the test's handler returning) waits on, and the collective completes with the right result. Rank 1
// joins only once every other rank has told it (over a side communicator) that it reported, so a loaded
// machine cannot make a waiting rank arrive after the late one; a rank that never reports makes rank 1
// join after 20 s and its own expectations fail, rather than hanging the job.
TEST(CollectiveTimeout, AWaitPastTheLimitNamesTheRankTheGroupAndTheCollective) {
  const int n = world_size(), r = world_rank();
  if (n < 2) GTEST_SKIP() << "needs a second rank to be late (run at np >= 2)";
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  std::unique_ptr<MpiCommunicator> group = world.split(0, r, "late_group");
  group->set_collective_timeout(0.3);
  MPI_Comm side = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &side);
  constexpr int kReportedTag = 7;
  std::vector<std::string> reports;
  struct Restore {
    CollectiveTimeoutHandler previous;
    MPI_Comm* side;
    ~Restore() {
      set_collective_timeout_handler(previous);
      MPI_Comm_free(side);
    }
  } restore{set_collective_timeout_handler([&](const CollectiveTimeout& t) {
              reports.push_back(t.message());
              if (reports.size() == 1) {
                int reported = 1;
                MPI_Send(&reported, 1, MPI_INT, 1, kReportedTag, side);
              }
            }),
            &side};
  // No ASSERT below: a rank leaving early would leave the others waiting in the next collective.
  auto first = [&] { return reports.empty() ? std::string("(no report)") : reports.front(); };
  auto late = [&] {
    if (r != 1) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (int heard = 0; heard < n - 1 && std::chrono::steady_clock::now() < deadline;) {
      int waiting = 0;
      MPI_Iprobe(MPI_ANY_SOURCE, kReportedTag, side, &waiting, MPI_STATUS_IGNORE);
      if (!waiting) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      int reported = 0;
      MPI_Recv(&reported, 1, MPI_INT, MPI_ANY_SOURCE, kReportedTag, side, MPI_STATUS_IGNORE);
      ++heard;
    }
  };
  const std::size_t big = 64 * 1024;  // the pairwise path (from 64 KiB), as the engine's buffers take
  for (std::size_t count : {std::size_t(3), big}) {
    reports.clear();
    std::vector<float> v(count, 1.f);
    late();
    group->all_reduce(v.data(), v.data(), count, DType::f32, ReduceOp::sum);
    EXPECT_EQ(v.front(), float(n));
    EXPECT_EQ(v.back(), float(n));
    if (r != 1) {
      EXPECT_FALSE(reports.empty()) << "rank " << r << " waited past the limit without a report (" << count << ")";
      const std::string m = first();
      EXPECT_NE(m.find("rank " + std::to_string(r) + " waited "), std::string::npos) << m;
      EXPECT_NE(m.find("for all_reduce on group 'late_group' (rank " + std::to_string(r) + " of " + std::to_string(n) +
                       ", mpi), past collective_timeout_s 0.3"),
                std::string::npos)
          << m;
    }
  }
  reports.clear();
  late();
  group->barrier();
  if (r != 1) {
    EXPECT_NE(first().find("for barrier on group 'late_group'"), std::string::npos) << first();
  }
  std::vector<float> shard(big / n + 1, 1.f), full((big / n + 1) * n);
  reports.clear();
  late();
  group->reduce_scatter(full.data(), shard.data(), big / n + 1, DType::f32, ReduceOp::sum);
  if (r != 1) {
    EXPECT_NE(first().find("for reduce_scatter on group 'late_group'"), std::string::npos) << first();
  }
  world.barrier();
}

}  // namespace
}  // namespace shardft
