// The MPI backend's pairwise reduce-scatter and all-reduce (comm/mpi_pairwise.hpp): exact results in
// every reducible type, the documented fold order bit for bit, blocks of unequal and zero length,
// in place and not, many collectives in flight at once completed in any order, and driven to the
// end by test() alone.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "comm/mpi_pairwise.hpp"
#include "kernels/bf16.hpp"

namespace shardft {
namespace {

// Rank q's input, the same on every rank that asks: random floats whose sums round differently in
// different orders, so the fold order shows in the bits.
std::vector<float> input_of(int q, std::size_t n) {
  std::mt19937 rng(1234u + static_cast<unsigned>(q));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng) * (1.0f + static_cast<float>(q));
  return v;
}

MPI_Comm dup_world() {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  return c;
}

TEST(PairwiseCollectives, ReduceScatterFoldsOwnBlockThenRanksBelowInOrder) {
  MpiCommunicator c(MPI_COMM_WORLD, "world");
  const int n = c.size(), r = c.rank();
  const std::size_t k = 16411;  // odd, and 64 KB a block (Open MPI's rendezvous protocol)
  std::vector<std::vector<float>> inputs;
  for (int q = 0; q < n; ++q) inputs.push_back(input_of(q, k * n));
  const std::vector<float>& mine = inputs[r];
  std::vector<float> out(k, -1.0f);
  c.reduce_scatter(mine.data(), out.data(), k, DType::f32, ReduceOp::sum);
  // out = in_r[r] + in_{r-1}[r] + in_{r-2}[r] + ..., left to right (ranks mod n).
  std::vector<float> expect(mine.begin() + r * k, mine.begin() + (r + 1) * k);
  for (int s = 1; s < n; ++s) {
    const std::vector<float>& other = inputs[(r - s + n) % n];
    for (std::size_t i = 0; i < k; ++i) expect[i] = expect[i] + other[r * k + i];
  }
  for (std::size_t i = 0; i < k; ++i) ASSERT_EQ(out[i], expect[i]) << "element " << i;

  std::vector<float> maxed(k);
  c.reduce_scatter(mine.data(), maxed.data(), k, DType::f32, ReduceOp::max);
  for (std::size_t i = 0; i < k; ++i) {
    float m = mine[r * k + i];
    for (int q = 0; q < n; ++q) m = std::max(m, inputs[q][r * k + i]);
    ASSERT_EQ(maxed[i], m);
  }
}

TEST(PairwiseCollectives, ReduceScatterInEveryReducibleType) {
  MpiCommunicator c(MPI_COMM_WORLD, "world");
  const int n = c.size(), r = c.rank();
  const int k = 20000;
  std::vector<double> d(n * k), dout(k);
  std::vector<std::int32_t> i32(n * k), i32out(k);
  std::vector<std::int64_t> i64(n * k), i64out(k);
  std::vector<bf16> b(n * k), bout(k);
  for (int i = 0; i < n * k; ++i) {
    d[i] = 0.25 * i + r;
    i32[i] = i - 7 * r;
    i64[i] = (std::int64_t(1) << 40) * (r + 1) + i;
    b[i] = bf16(0.5f * static_cast<float>((i % 8) + r));
  }
  c.reduce_scatter(d.data(), dout.data(), k, DType::f64, ReduceOp::sum);
  c.reduce_scatter(i32.data(), i32out.data(), k, DType::i32, ReduceOp::max);
  c.reduce_scatter(i64.data(), i64out.data(), k, DType::i64, ReduceOp::sum);
  c.reduce_scatter(b.data(), bout.data(), k, DType::bf16, ReduceOp::sum);
  const int ranks_sum = n * (n - 1) / 2;
  for (int j = 0; j < k; ++j) {
    const int i = r * k + j;
    EXPECT_DOUBLE_EQ(dout[j], n * 0.25 * i + ranks_sum);
    EXPECT_EQ(i32out[j], i);  // rank 0's is the largest
    EXPECT_EQ(i64out[j], (std::int64_t(1) << 40) * (n * (n + 1) / 2) + n * std::int64_t(i));
    EXPECT_EQ(float(bout[j]), 0.5f * static_cast<float>(n * (i % 8) + ranks_sum));  // small halves: exact in bf16
  }
  std::vector<std::uint8_t> bytes(n * 4), bytes_out(4);
  EXPECT_THROW(c.reduce_scatter(bytes.data(), bytes_out.data(), 4, DType::u8, ReduceOp::sum), std::invalid_argument);
}

TEST(PairwiseCollectives, ManyInFlightCompleteInAnyOrderAndByTestAlone) {
  MpiCommunicator c(MPI_COMM_WORLD, "world");
  const int n = c.size(), r = c.rank();
  const std::size_t k = 20000;  // 80 KB blocks: every collective below takes the pairwise path
  constexpr int kCollectives = 9;  // all-reduce, reduce-scatter, all-gather, three times over
  std::vector<std::vector<float>> in(kCollectives), out(kCollectives);
  std::vector<RequestPtr> reqs;
  for (int j = 0; j < kCollectives; ++j) {
    in[j].assign(j % 3 == 2 ? k : k * n, float(j + 1));
    for (std::size_t i = 0; i < in[j].size(); ++i) in[j][i] += float(i % 5) + float(r);
    out[j].assign(j % 3 == 1 ? k : k * n, 0.0f);
    if (j % 3 == 0) reqs.push_back(c.iall_reduce(in[j].data(), out[j].data(), k * n, DType::f32, ReduceOp::sum));
    if (j % 3 == 1) reqs.push_back(c.ireduce_scatter(in[j].data(), out[j].data(), k, DType::f32, ReduceOp::sum));
    if (j % 3 == 2) reqs.push_back(c.iall_gather(in[j].data(), out[j].data(), k, DType::f32));
  }
  // The odd ones by test() alone, then the even ones waited for newest first.
  for (bool all = false; !all;) {
    all = true;
    for (int j = 1; j < kCollectives; j += 2) all = reqs[j]->test() && all;
  }
  for (int j = kCollectives - 1; j >= 0; j -= 2) reqs[j]->wait();
  const float ranks_sum = float(n * (n - 1) / 2);
  for (int j = 0; j < kCollectives; ++j) {
    for (std::size_t i = 0; i < out[j].size(); ++i) {
      float expect = 0;
      if (j % 3 == 0) expect = n * (float(j + 1) + float(i % 5)) + ranks_sum;
      if (j % 3 == 1) expect = n * (float(j + 1) + float((r * k + i) % 5)) + ranks_sum;
      if (j % 3 == 2) expect = float(j + 1) + float((i % k) % 5) + float(i / k);  // block q is rank q's
      ASSERT_EQ(out[j][i], expect) << "collective " << j << " element " << i;
    }
  }
}

TEST(PairwiseCollectives, AllGatherInPlaceAndNotInEveryWidth) {
  MpiCommunicator c(MPI_COMM_WORLD, "world");
  const int n = c.size(), r = c.rank();
  for (std::size_t k : {std::size_t(3), std::size_t(40000)}) {  // MPI's path, then the pairwise one
    std::vector<std::int64_t> mine(k), all(k * n, -1), in_place(k * n, -1);
    std::vector<bf16> half(k), halves(k * n);
    for (std::size_t i = 0; i < k; ++i) {
      mine[i] = std::int64_t(r) << 33 | std::int64_t(i);
      half[i] = bf16(float(r) + 0.5f);
    }
    c.all_gather(mine.data(), all.data(), k, DType::i64);
    std::copy(mine.begin(), mine.end(), in_place.begin() + r * k);
    c.all_gather(in_place.data() + r * k, in_place.data(), k, DType::i64);
    c.all_gather(half.data(), halves.data(), k, DType::bf16);
    for (int q = 0; q < n; ++q) {
      for (std::size_t i = 0; i < k; ++i) {
        ASSERT_EQ(all[q * k + i], std::int64_t(q) << 33 | std::int64_t(i));
        ASSERT_EQ(float(halves[q * k + i]), float(q) + 0.5f);
      }
    }
    EXPECT_EQ(in_place, all);
  }
}

TEST(PairwiseCollectives, AllReduceOfAnyLengthInPlaceAndNot) {
  MPI_Comm comm = dup_world();
  int n = 0, r = 0;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &r);
  // Fewer elements than ranks (empty blocks), one short of a multiple, and a prime.
  for (std::size_t count : {std::size_t(1), std::size_t(3), std::size_t(4 * n - 1), std::size_t(10007)}) {
    const std::vector<float> mine = input_of(r, count);
    std::vector<float> out(count, -5.0f), in_place = mine;
    start_pairwise_all_reduce(comm, 1, mine.data(), out.data(), count, DType::f32, ReduceOp::sum)->wait();
    start_pairwise_all_reduce(comm, 2, in_place.data(), in_place.data(), count, DType::f32, ReduceOp::sum)->wait();
    // Every rank must end with the same bits: each element was folded on one rank only.
    std::vector<float> first_rank = out;
    MPI_Bcast(first_rank.data(), static_cast<int>(count), MPI_FLOAT, 0, comm);
    for (std::size_t i = 0; i < count; ++i) {
      double exact = 0;
      for (int q = 0; q < n; ++q) exact += input_of(q, count)[i];
      ASSERT_NEAR(out[i], exact, 1e-5 * n) << "count " << count << " element " << i;
      ASSERT_EQ(out[i], first_rank[i]);
      ASSERT_EQ(in_place[i], out[i]);
    }
  }
  MPI_Comm_free(&comm);
}

}  // namespace
}  // namespace shardft
