// The MPI backend of Communicator: every collective's result, in place and not, blocking and not,
// in every element type it reduces, and the ledger's byte counts; and the topology (the groups built
// on it are tested in test_parallel_plan.cpp).
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "comm/topology.hpp"
#include "kernels/bf16.hpp"

namespace shardft {
namespace {

MpiCommunicator& world() {
  static MpiCommunicator w(MPI_COMM_WORLD, "world");
  return w;
}

TEST(CommMpi, AllReduceSumAndMaxInEveryType) {
  auto& c = world();
  const int n = c.size(), r = c.rank();
  std::vector<float> f(5), fo(5);
  for (int i = 0; i < 5; ++i) f[i] = float(r * 10 + i);
  c.all_reduce(f.data(), fo.data(), 5, DType::f32, ReduceOp::sum);
  for (int i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(fo[i], float(10 * n * (n - 1) / 2 + n * i));
  c.all_reduce(f.data(), f.data(), 5, DType::f32, ReduceOp::max);  // in place
  for (int i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(f[i], float((n - 1) * 10 + i));

  std::vector<double> d{1.5 * r, -2.0};
  c.all_reduce(d.data(), d.data(), 2, DType::f64, ReduceOp::sum);
  EXPECT_DOUBLE_EQ(d[0], 1.5 * n * (n - 1) / 2);
  EXPECT_DOUBLE_EQ(d[1], -2.0 * n);
  std::int64_t big = (std::int64_t(1) << 40) + r;
  c.all_reduce(&big, &big, 1, DType::i64, ReduceOp::sum);
  EXPECT_EQ(big, n * (std::int64_t(1) << 40) + n * (n - 1) / 2);

  std::vector<bf16> b{bf16(0.5f * (r + 1)), bf16(-1.0f)};
  c.all_reduce(b.data(), b.data(), 2, DType::bf16, ReduceOp::sum);
  EXPECT_FLOAT_EQ(float(b[0]), 0.5f * n * (n + 1) / 2);
  EXPECT_FLOAT_EQ(float(b[1]), -1.0f * n);
  std::vector<std::uint8_t> bytes(3);
  EXPECT_THROW(c.all_reduce(bytes.data(), bytes.data(), 3, DType::u8, ReduceOp::sum), std::invalid_argument);
}

TEST(CommMpi, ReduceScatterGivesEachRankItsBlock) {
  auto& c = world();
  const int n = c.size(), r = c.rank(), k = 3;
  std::vector<float> send(n * k), out(k);
  for (int i = 0; i < n * k; ++i) send[i] = float(i + 100 * r);
  c.reduce_scatter(send.data(), out.data(), k, DType::f32, ReduceOp::sum);
  for (int i = 0; i < k; ++i) EXPECT_FLOAT_EQ(out[i], float(n * (r * k + i) + 100 * n * (n - 1) / 2));
  c.reduce_scatter(send.data(), send.data(), k, DType::f32, ReduceOp::sum);  // in place: result at the start
  for (int i = 0; i < k; ++i) EXPECT_FLOAT_EQ(send[i], out[i]);
}

TEST(CommMpi, AllGatherConcatenatesInRankOrder) {
  auto& c = world();
  const int n = c.size(), r = c.rank(), k = 4;
  std::vector<std::int32_t> mine(k), all(n * k, -1);
  for (int i = 0; i < k; ++i) mine[i] = r * 1000 + i;
  c.all_gather(mine.data(), all.data(), k, DType::i32);
  for (int q = 0; q < n; ++q) {
    for (int i = 0; i < k; ++i) EXPECT_EQ(all[q * k + i], q * 1000 + i);
  }
  std::vector<std::int32_t> in_place(n * k, -1);
  std::copy(mine.begin(), mine.end(), in_place.begin() + r * k);
  c.all_gather(in_place.data() + r * k, in_place.data(), k, DType::i32);
  EXPECT_EQ(in_place, all);
}

TEST(CommMpi, BroadcastAndAllToAll) {
  auto& c = world();
  const int n = c.size(), r = c.rank();
  const int root = n - 1;
  std::vector<double> v(3, r == root ? 7.25 : 0.0);
  c.broadcast(v.data(), 3, DType::f64, root);
  for (double x : v) EXPECT_DOUBLE_EQ(x, 7.25);

  std::vector<std::int8_t> send(2 * n), recv(2 * n);
  for (int q = 0; q < n; ++q) send[2 * q] = std::int8_t(r), send[2 * q + 1] = std::int8_t(q);
  c.all_to_all(send.data(), recv.data(), 2, DType::i8);
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(recv[2 * q], q);      // came from rank q
    EXPECT_EQ(recv[2 * q + 1], r);  // addressed to me
  }
}

TEST(CommMpi, NonblockingCollectivesOverlap) {
  auto& c = world();
  const int n = c.size();
  std::vector<float> a(1000, 1.0f), b(1000, 2.0f);
  RequestPtr ra = c.iall_reduce(a.data(), a.data(), a.size(), DType::f32, ReduceOp::sum);
  RequestPtr rb = c.iall_reduce(b.data(), b.data(), b.size(), DType::f32, ReduceOp::sum);
  rb->wait();
  ra->wait();
  EXPECT_FLOAT_EQ(a[999], float(n));
  EXPECT_FLOAT_EQ(b[0], 2.0f * n);
}

TEST(CommMpi, LedgerCountsBusBytes) {
  MpiCommunicator c(MPI_COMM_WORLD, "world");
  const int n = c.size();
  const double share = double(n - 1) / n;
  std::vector<float> x(64 * n);
  c.all_reduce(x.data(), x.data(), x.size(), DType::f32, ReduceOp::sum);
  EXPECT_DOUBLE_EQ(c.ledger().of(Collective::all_reduce), 2.0 * 4 * 64 * n * share);
  c.reduce_scatter(x.data(), x.data(), 64, DType::f32, ReduceOp::sum);
  EXPECT_DOUBLE_EQ(c.ledger().of(Collective::reduce_scatter), 4.0 * 64 * n * share);
  c.all_gather(x.data(), x.data(), 64, DType::bf16);
  EXPECT_DOUBLE_EQ(c.ledger().of(Collective::all_gather), 2.0 * 64 * n * share);
  EXPECT_EQ(c.ledger().calls(), 3);
  EXPECT_DOUBLE_EQ(c.ledger().total(), 4.0 * 64 * n * share * 2 + 4.0 * 64 * n * share + 2.0 * 64 * n * share);
  c.ledger().reset();
  EXPECT_EQ(c.ledger().total(), 0.0);
}

TEST(CommTopology, OverrideMakesNodesOfConsecutiveRanks) {
  const int n = world().size(), r = world().rank();
  if (n % 2 == 0) {
    const Topology t = Topology::discover(MPI_COMM_WORLD, 2);
    EXPECT_EQ(t.num_nodes, n / 2);
    EXPECT_EQ(t.node, r / 2);
    EXPECT_EQ(t.local_rank, r % 2);
  } else {
    EXPECT_THROW(Topology::discover(MPI_COMM_WORLD, 2), std::invalid_argument);
  }
  const Topology real = Topology::discover(MPI_COMM_WORLD);
  EXPECT_EQ(real.num_nodes, 1);  // the tests run on one machine
  EXPECT_EQ(real.ranks_per_node, n);
  EXPECT_EQ(real.local_rank, r);
}

}  // namespace
}  // namespace shardft
