// ZeRO++'s compressed collectives against their exact counterparts: the int8 all-gather (qwZ) and
// the int4 hierarchical reduce-scatter (qgZ), on every layout the rank count allows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "comm/quantized_collectives.hpp"
#include "parallel/parallel_plan.hpp"
#include "config/recipe_sections.hpp"

namespace shardft {
namespace {

// qgZ's two hops over the whole world, with `per_node` ranks counted as one node (0: as MPI finds).
ParallelPlan qgz_plan(int per_node) {
  TrainConfig cfg;
  cfg.zero_stage = 2;
  cfg.zero_quantized_gradients = true;
  cfg.ranks_per_node = per_node;
  return ParallelPlan::create(MPI_COMM_WORLD, parallel_config(cfg));
}

TEST(QuantizedCollectives, Int8AllGatherIsWithinHalfAStepAndIdenticalEverywhere) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  const int n = world.size(), r = world.rank(), block = 64;
  const std::size_t count = 200;  // 4 blocks, the last partial
  std::mt19937 rng(100 + r);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> shard(count), exact(count * n), got(count * n);
  for (auto& v : shard) v = normal(rng);
  shard[5] = 1e4f;  // one huge value in block 0
  for (std::size_t i = 64; i < 128; ++i) shard[i] = 0.f;  // an all-zero block
  world.all_gather(shard.data(), exact.data(), count, DType::f32);
  iquantized_all_gather_int8(world, shard.data(), count, got.data(), block)->wait();
  for (int q = 0; q < n; ++q) {
    for (std::size_t b = 0; b < count; b += block) {
      float amax = 0;
      for (std::size_t i = b; i < std::min(count, b + block); ++i) amax = std::max(amax, std::abs(exact[q * count + i]));
      for (std::size_t i = b; i < std::min(count, b + block); ++i) {
        ASSERT_LE(std::abs(got[q * count + i] - exact[q * count + i]), amax / 127 / 2 * 1.0001f + 1e-30f)
            << "rank " << q << " element " << i;
      }
    }
  }
  double sum = 0;
  for (float v : got) sum += v;
  double lo = sum, hi = sum;
  world.all_reduce(&lo, &lo, 1, DType::f64, ReduceOp::max);
  hi = -hi;
  world.all_reduce(&hi, &hi, 1, DType::f64, ReduceOp::max);
  EXPECT_EQ(lo, -hi) << "ranks dequantized different weights";
  EXPECT_EQ(world.ledger().of(Collective::all_gather), bus_bytes(Collective::all_gather, double(int8_payload_bytes(count, block)) * n, n) +
                                                           bus_bytes(Collective::all_gather, 4.0 * count * n, n));
}

TEST(QuantizedCollectives, Int4HierarchicalReduceScatterMatchesTheExactSum) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  const int n = world.size(), r = world.rank(), block = 32;
  for (int per_node : {1, n}) {
    if (n % per_node != 0) continue;
    const ParallelPlan g = qgz_plan(per_node);
    const Topology& topo = g.topology();
    const std::size_t S = 96;
    // Exactly representable data: integers with a 7 in every block, the same on every rank, so every
    // quantization is exact and the result must be n times the input, shard by shard.
    std::vector<float> same(S * n), out(S);
    for (std::size_t i = 0; i < same.size(); ++i) same[i] = (i % block == 0) ? 7.f : float(int(i * 5 % 15) - 7);
    quantized_reduce_scatter_int4(*g.qgz_intra(), *g.qgz_cross(), same.data(), S, out.data(), block);
    for (std::size_t i = 0; i < S; ++i) ASSERT_EQ(out[i], n * same[r * S + i]) << "layout " << per_node << " i " << i;

    // Ordinary data: the error of int4 blocks is bounded; compare with MPI's exact reduce-scatter.
    std::mt19937 rng(7 * r + per_node);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<float> full(S * n), exact(S);
    for (auto& v : full) v = normal(rng);
    world.reduce_scatter(full.data(), exact.data(), S, DType::f32, ReduceOp::sum);
    quantized_reduce_scatter_int4(*g.qgz_intra(), *g.qgz_cross(), full.data(), S, out.data(), block);
    double num = 0, den = 0;
    for (std::size_t i = 0; i < S; ++i) {
      num += (out[i] - exact[i]) * (out[i] - exact[i]);
      den += exact[i] * exact[i];
    }
    // Each of the two hops adds about step/sqrt(12) per value (step = block max / 7, ~0.3 sigma for
    // normal data in blocks of 32): about 0.12-0.16 of the sum's size at 2-4 ranks.
    EXPECT_LT(std::sqrt(num / den), 0.25) << "layout " << per_node;
    EXPECT_GT(std::sqrt(num / den), 0.0) << "int4 of normal data cannot be exact";
    // bytes: stage 1 inside the node, stage 2 across nodes
    EXPECT_EQ(g.qgz_intra()->ledger().inter_node(), 0.0);
    if (topo.num_nodes > 1) {
      EXPECT_GT(g.qgz_cross()->ledger().inter_node(), 0.0);
    }
  }
}

TEST(QuantizedCollectives, NonFiniteValuesAreRefusedNotSent) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  std::vector<float> shard(70, 1.f), full(70 * world.size());
  shard[3] = std::nanf("");  // on every rank, so every rank refuses before communicating
  try {
    iquantized_all_gather_int8(world, shard.data(), shard.size(), full.data(), 32);
    FAIL() << "a NaN was quantized";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("qwZ weight all-gather: 1 non-finite"), std::string::npos) << e.what();
  }
  shard[3] = INFINITY;
  const ParallelPlan g = qgz_plan(0);
  std::vector<float> grads(70 * world.size(), 1.f), out(70);
  grads[1] = -INFINITY;
  EXPECT_THROW(quantized_reduce_scatter_int4(*g.qgz_intra(), *g.qgz_cross(), grads.data(), 70, out.data(), 32), std::runtime_error);
}

}  // namespace
}  // namespace shardft
