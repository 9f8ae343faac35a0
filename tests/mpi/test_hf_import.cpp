// Loading an HF model directory under ZeRO: each rank reads only the elements it owns (stage 3: one
// shard of the model), the shards add up to the whole model exactly once, and the sharded model
// computes the loss transformers computed for the fixture batch.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "comm/mpi_communicator.hpp"
#include "io/hf_weights.hpp"
#include "tests/common/hf_fixture_batch.hpp"
#include "tests/common/hf_fixture_grads.hpp"
#include "train/trainer.hpp"

namespace shardft {
namespace {

const std::string& kHfDir = testing_util::hf_fixture_dir();
using testing_util::hf_fixture_batch;

TEST(HfImportSharded, EachRankReadsItsShardAndTheLossMatchesTransformers) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  for (const std::string model : {"tiny_qwen2", "tiny_llama", "tiny_mistral"}) {
    for (int stage : {0, 3}) {
      SCOPED_TRACE(model + " stage " + std::to_string(stage));
      const TrainConfig cfg = load_train_config(
          "", {"--model_name_or_path=" + kHfDir + "/" + model, "--zero_stage=" + std::to_string(stage)});
      Trainer tr(cfg, 1, world);  // loads the weights through the sharded path

      // Read again through a counting reader: which elements does this rank ask for?
      HfModelWeights weights(cfg.model_name_or_path);
      const ParamLayout& layout = tr.model().layout();
      std::vector<int> hits(static_cast<std::size_t>(layout.total_numel()), 0);
      std::int64_t asked = 0;
      tr.engine().load_weights([&](int param, std::int64_t first, std::int64_t count, float* out) {
        weights.read(layout.params()[param].name, first, count, out);
        for (std::int64_t i = 0; i < count; ++i) ++hits[layout.offset(param) + first + i];
        asked += count;
      });
      std::vector<int> total(hits.size(), 0);
      MPI_Allreduce(hits.data(), total.data(), static_cast<int>(hits.size()), MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      const int copies = stage == 0 ? world.size() : 1;  // stage 0 replicates, stage 3 splits
      for (std::size_t i = 0; i < total.size(); ++i) {
        ASSERT_EQ(total[i], copies) << "element " << i << " of the layout";
      }
      if (stage == 3) {
        EXPECT_LE(asked, layout.total_numel() / world.size() + 1024) << "a rank read more than its shard";
      }

      const auto fx = testing_util::hf_fixture(model);
      const LossSums ls = tr.model().forward_loss(to_model_inputs(hf_fixture_batch(fx)), tr.engine());
      const double loss = ls.loss_sum / static_cast<double>(ls.num_targets);
      const double expected = fx.at("loss").get<double>();
      EXPECT_LT(std::abs(loss - expected) / expected, 1e-4) << loss << " vs transformers " << expected;
    }
  }
}

// Qwen3, Llama 3.2, yarn Qwen2 and an explicit head_dim under ZeRO: at 2 ranks each rank takes one row of
// the fixture batch (at other sizes every rank takes the whole batch, its loss weighted 1 / ranks), and the
// reduced gradient of every parameter equals transformers' to 1e-4, as does the loss.
TEST(HfImportSharded, HeadDimFamiliesLossAndGradientsMatchTransformers) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  const int N = world.size(), rank = world.rank();
  for (const std::string model : {"tiny_qwen3", "tiny_llama32", "tiny_qwen2_yarn", "tiny_headdim"}) {
    const auto fx = testing_util::hf_fixture(model);
    const TokenBatch all = hf_fixture_batch(fx);
    const TokenBatch mine = N == 2 ? hf_fixture_batch(fx, rank, 1) : all;
    for (int stage : {1, 3}) {
      SCOPED_TRACE(model + " stage " + std::to_string(stage));
      const TrainConfig cfg = load_train_config(
          "", {"--model_name_or_path=" + kHfDir + "/" + model, "--zero_stage=" + std::to_string(stage)});
      Trainer tr(cfg, 1, world);
      ZeroEngine& eng = tr.engine();
      eng.begin_step();
      eng.begin_micro_batch({0, 1});
      const double normalizer = static_cast<double>(all.num_targets()) * (N == 2 ? 1 : N);
      const LossSums ls = tr.model().forward_backward(to_model_inputs(mine), eng, eng, normalizer);
      eng.end_micro_batch();
      const std::vector<float> grads = eng.gather_grads();
      double loss = ls.loss_sum / normalizer;
      MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      const double expected = fx.at("loss").get<double>();
      EXPECT_LT(std::abs(loss - expected) / expected, 1e-4) << loss << " vs transformers " << expected;
      const auto g = testing_util::compare_hf_grads(fx.at("grads"), tr.model().layout(), grads);
      EXPECT_LT(g.worst, 1e-4) << g.where;
      EXPECT_EQ(g.params_compared, static_cast<int>(tr.model().layout().params().size()));
    }
  }
}

}  // namespace
}  // namespace shardft
