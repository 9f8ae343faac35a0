// A bitsandbytes 4-bit checkpoint (tests/reference/hf/tiny_llama_bnb4, written by
// make_bnb4bit_checkpoint.py with bitsandbytes' own quantize_4bit and QuantState.as_dict): its NF4 bytes
// are the bytes shardft's quantizer makes from tiny_llama, so QLoRA from it equals QLoRA from tiny_llama
// bit for bit (losses, gradients, adapters) at every stage; eval and generate read it dequantized. The
// variants it must refuse (fp4, no double quant, blocksize 128, a missing companion, 8-bit, a recipe
// that is not QLoRA) are written into a temp dir from the fixture with one thing changed.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "tests/common/self_communicator.hpp"
#include "io/hf_weights.hpp"
#include "kernels/nf4_quantize.hpp"
#include "tests/common/peft_fixture_run.hpp"

namespace shardft {
namespace {
using namespace testing_util;
namespace fs = std::filesystem;

const std::string kBnb4 = std::string(SHARDFT_REFERENCE_DIR) + "/hf/tiny_llama_bnb4";
const std::string kPlain = std::string(SHARDFT_REFERENCE_DIR) + "/hf/tiny_llama";

template <typename T>
std::vector<T> host_copy(const View1<T>& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return std::vector<T>(h.data(), h.data() + h.extent(0));
}

TEST(Bnb4Checkpoint, BytesEqualShardftsOwnQuantization) {
  HfModelWeights bnb(kBnb4), plain(kPlain);
  EXPECT_EQ(bnb.names(), plain.names());  // the companions are part of their weight
  int nf4 = 0;
  for (const std::string& name : plain.names()) {
    ASSERT_EQ(bnb.shape(name), plain.shape(name)) << name;
    const bool linear = name.find("_proj.weight") != std::string::npos;
    ASSERT_EQ(bnb.is_nf4(name), linear) << name;
    std::int64_t n = 1;
    for (std::int64_t d : plain.shape(name)) n *= d;
    std::vector<float> w(n);
    plain.read(name, 0, n, w.data());
    if (!linear) {
      std::vector<float> same(n);
      bnb.read(name, 0, n, same.data());
      EXPECT_EQ(std::memcmp(w.data(), same.data(), 4 * n), 0) << name;
      continue;
    }
    ++nf4;
    View1<float> src("src", n);
    Kokkos::deep_copy(src, Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(w.data(), n));
    const Nf4Tensor ours = nf4_quantize(src, plain.shape(name), name);
    const Nf4Tensor theirs = bnb.read_nf4(name);
    EXPECT_EQ(theirs.shape, ours.shape) << name;
    EXPECT_EQ(host_copy(theirs.packed), host_copy(ours.packed)) << name;
    EXPECT_EQ(host_copy(theirs.absmax_q), host_copy(ours.absmax_q)) << name;
    EXPECT_EQ(host_copy(theirs.absmax2), host_copy(ours.absmax2)) << name;
    EXPECT_EQ(theirs.offset, ours.offset) << name;
    // read() gives the dequantized values: what eval, generate and --merge_adapters see.
    View1<float> deq("deq", n);
    nf4_dequantize(ours, deq);
    std::vector<float> got(n - 3);
    bnb.read(name, 3, n - 3, got.data());
    EXPECT_EQ(std::memcmp(got.data(), host_copy(deq).data() + 3, 4 * (n - 3)), 0) << name;
  }
  EXPECT_EQ(nf4, 14);
}

TEST(Bnb4Checkpoint, QloraRunEqualsQloraFromTheFullPrecisionBase) {
  const std::string name = "llama_all_linear";  // PEFT fixture on hf/tiny_llama
  const TokenBatch batch = peft_fixture_batch(name);
  for (int stage : {0, 3}) {
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE("stage " + std::to_string(stage) + (bf16 ? " bf16" : " fp32"));
      std::vector<std::string> flags = {"--zero_stage=" + std::to_string(stage), bf16 ? "--bf16=true" : "--bf16=false",
                                        "--load_in_4bit=true"};
      Trainer plain(peft_fixture_config(name, flags), 3, self());
      flags.push_back("--model_name_or_path=" + kBnb4);
      Trainer bnb(peft_fixture_config(name, flags), 3, self());
      const PeftFixtureRun p = run_peft_fixture(plain, batch, 3);
      const PeftFixtureRun b = run_peft_fixture(bnb, batch, 3);
      ASSERT_EQ(p.weights_before.size(), b.weights_before.size());
      EXPECT_EQ(std::memcmp(p.weights_before.data(), b.weights_before.data(), 4 * p.weights_before.size()), 0);
      for (int s = 0; s < 3; ++s) EXPECT_EQ(b.losses[s], p.losses[s]) << "step " << s + 1;
      EXPECT_EQ(std::memcmp(p.grads_step1.data(), b.grads_step1.data(), 4 * p.grads_step1.size()), 0);
      EXPECT_EQ(std::memcmp(p.weights_after.data(), b.weights_after.data(), 4 * p.weights_after.size()), 0);
      EXPECT_EQ(b.memory.nf4_weights, p.memory.nf4_weights);
      EXPECT_NE(p.weights_before, p.weights_after);  // it trained
    }
  }
}

// ---- refused variants ------------------------------------------------------------------------

struct RawTensor {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::vector<char> bytes;
};

std::map<std::string, RawTensor> read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::uint64_t len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  std::string text(len, '\0');
  in.read(text.data(), static_cast<std::streamsize>(len));
  const nlohmann::json header = nlohmann::json::parse(text);
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, RawTensor> out;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto b = it.value()["data_offsets"][0].get<std::size_t>(), e = it.value()["data_offsets"][1].get<std::size_t>();
    out[it.key()] = {it.value()["dtype"], it.value()["shape"].get<std::vector<std::int64_t>>(),
                     std::vector<char>(data.begin() + b, data.begin() + e)};
  }
  return out;
}

void write_raw(const std::string& path, const std::map<std::string, RawTensor>& tensors) {
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
  std::size_t off = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  const std::string text = header.dump();
  const std::uint64_t len = text.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(text.data(), static_cast<std::streamsize>(len));
  for (const auto& entry : tensors) out.write(entry.second.bytes.data(), static_cast<std::streamsize>(entry.second.bytes.size()));
}

// A copy of the fixture with its tensors and config.json edited.
std::string variant(const std::string& tag, const std::function<void(std::map<std::string, RawTensor>&)>& tensors,
                    const std::function<void(nlohmann::json&)>& config = {}) {
  const std::string dir = ::testing::TempDir() + "bnb4_" + tag;
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto t = read_raw(kBnb4 + "/model.safetensors");
  if (tensors) tensors(t);
  write_raw(dir + "/model.safetensors", t);
  std::ifstream in(kBnb4 + "/config.json");
  nlohmann::json c = nlohmann::json::parse(in);
  if (config) config(c);
  std::ofstream(dir + "/config.json") << c.dump(2);
  fs::copy_file(kBnb4 + "/tokenizer.json", dir + "/tokenizer.json");
  return dir;
}

const std::string kQ = "model.layers.1.self_attn.k_proj.weight";

void edit_state(std::map<std::string, RawTensor>& t, const std::function<void(nlohmann::json&)>& edit,
                const std::string& key = kQ + ".quant_state.bitsandbytes__nf4") {
  RawTensor& s = t.at(key);
  nlohmann::json j = nlohmann::json::parse(s.bytes.begin(), s.bytes.end());
  edit(j);
  const std::string text = j.dump();
  s.bytes.assign(text.begin(), text.end());
  s.shape = {static_cast<std::int64_t>(text.size())};
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// The error a QLoRA recipe over `dir` meets, at the config or at reading the weights.
std::string qlora_error(const std::string& dir, const std::vector<std::string>& extra = {"--load_in_4bit=true"}) {
  return error_of([&] {
    std::vector<std::string> flags = {"--model_name_or_path=" + dir, "--use_peft=true", "--lora_target_modules=all-linear"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    Trainer tr(load_train_config("", flags), 1, self());
  });
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(Bnb4Checkpoint, TheFixtureLoadsAndItsBrokenVariantsAreNamed) {
  EXPECT_EQ(qlora_error(kBnb4), "");
  EXPECT_EQ(qlora_error(variant("unchanged", {})), "");  // the rewriting itself changes nothing that matters

  // Not a QLoRA recipe: the folder and both keys.
  std::string e = qlora_error(kBnb4, {});
  EXPECT_HAS(e, kBnb4);
  EXPECT_HAS(e, "load_in_4bit: true and use_peft: true");
  e = error_of([&] { load_train_config("", {"--model_name_or_path=" + kBnb4, "--load_in_4bit=true"}); });
  EXPECT_HAS(e, "use_peft");
  e = qlora_error(kBnb4, {"--load_in_4bit=true", "--bf16=true", "--bnb_4bit_compute_dtype=bfloat16"});
  EXPECT_HAS(e, "bnb_4bit_compute_dtype bfloat16 contradicts");
  EXPECT_HAS(e, "quantization_config.bnb_4bit_compute_dtype float32");

  // config.json's quantization_config: the file and the key.
  auto config_variant = [&](const std::string& tag, const std::function<void(nlohmann::json&)>& edit) {
    return qlora_error(variant(tag, {}, [&](nlohmann::json& c) { edit(c["quantization_config"]); }));
  };
  e = config_variant("fp4_config", [](nlohmann::json& q) { q["bnb_4bit_quant_type"] = "fp4"; });
  EXPECT_HAS(e, "config.json: quantization_config.bnb_4bit_quant_type: \"fp4\" is not supported");
  e = config_variant("no_double_config", [](nlohmann::json& q) { q["bnb_4bit_use_double_quant"] = false; });
  EXPECT_HAS(e, "config.json: quantization_config.bnb_4bit_use_double_quant");
  e = config_variant("int8", [](nlohmann::json& q) {
    q["load_in_8bit"] = true;
    q["load_in_4bit"] = false;
  });
  EXPECT_HAS(e, "config.json: quantization_config.load_in_8bit: a bitsandbytes 8-bit");
  e = config_variant("storage", [](nlohmann::json& q) { q["bnb_4bit_quant_storage"] = "bfloat16"; });
  EXPECT_HAS(e, "quantization_config.bnb_4bit_quant_storage");

  // The tensors: the file and the tensor.
  const std::string file = "/model.safetensors: tensor '";
  e = qlora_error(variant("missing_absmax", [](auto& t) { t.erase(kQ + ".absmax"); }));
  EXPECT_HAS(e, file + kQ + "': a bitsandbytes 4-bit weight");
  EXPECT_HAS(e, "companion '" + kQ + ".absmax', which is missing");
  e = qlora_error(variant("missing_state", [](auto& t) { t.erase(kQ + ".quant_state.bitsandbytes__nf4"); }));
  EXPECT_HAS(e, "quant_state '" + kQ + ".quant_state.bitsandbytes__nf4' is missing");
  e = qlora_error(variant("bare_u8", [](auto& t) {
    for (const char* k : {".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map", ".quant_state.bitsandbytes__nf4"}) {
      t.erase(kQ + k);
    }
  }));
  EXPECT_HAS(e, file + kQ + "': is U8 with no '" + kQ + ".quant_state.bitsandbytes__nf4'");
  e = qlora_error(variant("blocksize", [](auto& t) { edit_state(t, [](nlohmann::json& j) { j["blocksize"] = 128; }); }));
  EXPECT_HAS(e, file + kQ + ".quant_state.bitsandbytes__nf4': blocksize 128");
  e = qlora_error(variant("no_nested", [](auto& t) {
    edit_state(t, [](nlohmann::json& j) {
      j.erase("nested_offset");
      j.erase("nested_blocksize");
    });
  }));
  EXPECT_HAS(e, "without double quantization");
  e = qlora_error(variant("fp4_state", [](auto& t) {
    edit_state(t, [](nlohmann::json& j) { j["quant_type"] = "fp4"; });
    t[kQ + ".quant_state.bitsandbytes__fp4"] = t.at(kQ + ".quant_state.bitsandbytes__nf4");
    t.erase(kQ + ".quant_state.bitsandbytes__nf4");
  }));
  EXPECT_HAS(e, file + kQ + ".quant_state.bitsandbytes__fp4': an FP4 weight");
  e = qlora_error(variant("quant_map", [](auto& t) { t.at(kQ + ".quant_map").bytes[0] ^= 1; }));
  EXPECT_HAS(e, file + kQ + ".quant_map': entry 0");
  e = qlora_error(variant("short_absmax", [](auto& t) {
    t.at(kQ + ".absmax").bytes.pop_back();
    t.at(kQ + ".absmax").shape = {3};
  }));
  EXPECT_HAS(e, file + kQ + ".absmax': is U8 [3], expected U8 with 4 elements");
}

}  // namespace
}  // namespace shardft
