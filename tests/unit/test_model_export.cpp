// The end-of-run export (infer/model_export.hpp): the dtype export_dtype picks, and the files save_model
// streams from the engine's blocks: an HF model (one file, or shards with an index past max_shard_size)
// whose every tensor is the gathered master weight rounded to the export dtype, with LoRA merged into
// the base and the adapter beside it.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "tests/common/self_communicator.hpp"
#include "io/hf_weights.hpp"
#include "io/peft_adapter.hpp"
#include "kernels/bf16.hpp"
#include "kernels/fp16.hpp"
#include "tests/common/peft_fixture_run.hpp"
#include "infer/adapter_export.hpp"
#include "infer/model_export.hpp"

namespace shardft {
namespace {
using namespace testing_util;

TEST(ModelExport, AutoTakesTheSourceDtypeAndAnExplicitDtypeWins) {
  using J = nlohmann::json;
  EXPECT_EQ(resolve_export_dtype("auto", nullptr), TensorDtype::F32);  // a model defined here
  EXPECT_EQ(resolve_export_dtype("auto", J{{"torch_dtype", "bfloat16"}}), TensorDtype::BF16);
  EXPECT_EQ(resolve_export_dtype("auto", J{{"dtype", "float16"}}), TensorDtype::F16);  // transformers 5's name
  EXPECT_EQ(resolve_export_dtype("auto", J{{"torch_dtype", "float32"}}), TensorDtype::F32);
  EXPECT_EQ(resolve_export_dtype("auto", J{{"model_type", "llama"}}), TensorDtype::F32);  // none named
  EXPECT_EQ(resolve_export_dtype("auto", J{{"torch_dtype", nullptr}, {"dtype", "bfloat16"}}), TensorDtype::BF16);
  EXPECT_EQ(resolve_export_dtype("fp32", J{{"torch_dtype", "bfloat16"}}), TensorDtype::F32);
  EXPECT_EQ(resolve_export_dtype("bf16", nullptr), TensorDtype::BF16);
  EXPECT_EQ(resolve_export_dtype("fp16", J{{"torch_dtype", "bfloat16"}}), TensorDtype::F16);
  try {
    resolve_export_dtype("auto", J{{"torch_dtype", "float8_e4m3fn"}});
    ADD_FAILURE() << "an fp8 source dtype was taken";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("float8_e4m3fn"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("export_dtype"), std::string::npos) << e.what();
  }
}

float rounded(float v, TensorDtype dtype) {
  if (dtype == TensorDtype::BF16) return bf16::to_float(bf16::round_bits(v));
  if (dtype == TensorDtype::F16) return round_to_fp16(v);
  return v;
}

// Every tensor of the export in `dir` against `expected` (layout order, fp32) rounded to `dtype`.
void expect_export_equals(const std::string& dir, const ParamLayout& layout, const std::vector<float>& expected,
                          TensorDtype dtype) {
  HfModelWeights w(dir);
  std::size_t tensors = 0;
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    if (spec.is_lora()) {
      EXPECT_FALSE(w.has(spec.name)) << spec.name;
      continue;
    }
    ASSERT_TRUE(w.has(spec.name)) << spec.name;
    EXPECT_EQ(w.shape(spec.name), spec.shape) << spec.name;
    std::vector<float> got(static_cast<std::size_t>(spec.numel()));
    w.read(spec.name, 0, spec.numel(), got.data());
    const float* want = expected.data() + layout.offset(static_cast<int>(p));
    std::int64_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) bad += got[i] != rounded(want[i], dtype);
    EXPECT_EQ(bad, 0) << spec.name;
    ++tensors;
  }
  EXPECT_EQ(w.names().size(), tensors);
}

TEST(ModelExport, StreamsTheModelIntoShardsInTheExportDtype) {
  for (const std::string peft : {"full", "LoRA"}) {
    for (TensorDtype dtype : {TensorDtype::F32, TensorDtype::BF16, TensorDtype::F16}) {
      for (std::uint64_t shard : {std::uint64_t{5000000000}, std::uint64_t{40000}}) {
        SCOPED_TRACE(peft + " " + dtype_tag(dtype) + ", shards of " + std::to_string(shard) + " B");
        std::vector<std::string> flags = {"--learning_rate=1e-2"};
        if (peft == "LoRA") flags.push_back("--lora_dropout=0");
        TrainConfig cfg = peft_fixture_config("llama_all_linear", flags);
        if (peft == "full") {
          cfg.use_peft = false;
          cfg.adapter_path.clear();
        }
        Trainer tr(cfg, 3, self());
        const ParamLayout& layout = tr.model().layout();
        ASSERT_EQ(layout.has_frozen(), peft == "LoRA");
        run_peft_fixture(tr, peft_fixture_batch("llama_all_linear"), 2);
        std::vector<float> expected = tr.engine().gather_master();
        const LoraTensors factors = lora_tensors_of(layout, expected);
        if (layout.has_frozen()) merge_lora_terms(layout, expected);

        const std::string dir = ::testing::TempDir() + "/model_export";
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
        std::ofstream(dir + "/model-00009-of-00009.safetensors") << "an earlier export's shard";
        ModelExportConfig ec;
        ec.output_dir = dir;
        ec.model_name_or_path = "base";
        ec.max_shard_bytes = shard;
        const SafetensorsShardsReport rep = save_model(tr.engine(), layout, ec, dtype, true);
        expect_export_equals(dir, layout, expected, dtype);
        const bool sharded = shard < 5000000000;
        EXPECT_EQ(rep.files > 1, sharded);
        EXPECT_EQ(std::filesystem::exists(dir + "/model.safetensors"), !sharded);
        EXPECT_EQ(std::filesystem::exists(dir + "/model.safetensors.index.json"), sharded);
        EXPECT_FALSE(std::filesystem::exists(dir + "/model-00009-of-00009.safetensors"));  // stale, removed
        ASSERT_EQ(rep.removed.size(), 1u);
        EXPECT_EQ(std::filesystem::exists(dir + "/" + std::string(kAdapterWeightsFile)), layout.has_frozen());
        if (!layout.has_frozen()) continue;
        const PeftAdapter back = read_peft_adapter(dir);
        ASSERT_EQ(back.tensors.size(), factors.size());
        for (const auto& [name, f] : factors) {
          const LoraFactors& g = back.tensors.at(name);
          EXPECT_EQ(g.A.data, f.A.data) << name;  // fp32, as PEFT keeps the adapter
          EXPECT_EQ(g.B.data, f.B.data) << name;
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardft
