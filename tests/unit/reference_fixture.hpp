// Loader for the reference fixtures written by tests/reference/make_fixtures.py.
//
// A fixture is a pair <dir>/<name>.json + <dir>/<name>.bin (see tests/reference/README.md).
// In tests the fixture folder is the compile definition SHARDFT_REFERENCE_DIR, e.g.
//   auto fx = ReferenceFixture::load(SHARDFT_REFERENCE_DIR, "tiny_gqa_untied");
// Every problem (missing or unreadable file, malformed JSON, a .bin whose size does not match
// the tensor table, inconsistent shapes) throws std::runtime_error naming the file.
#ifndef SHARDFT_TESTS_REFERENCE_FIXTURE_HPP
#define SHARDFT_TESTS_REFERENCE_FIXTURE_HPP

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

struct ReferenceFixture {
  nlohmann::json config;  // HF config.json keys: vocab_size, hidden_size, ...
  int batch = 0, seq = 0;
  // Flat row-major [batch, seq]. targets are already shifted (targets[b,t] is what
  // logits[b,t] predict); -100 = no loss.
  std::vector<int32_t> input_ids, position_ids, seq_ids, targets;
  double loss = 0.0;  // fp32 loss: sum of CE over targets / num_targets
  int64_t num_targets = 0;
  // HF parameter name -> row-major float32 data; grads are dloss/dw.
  std::map<std::string, std::vector<float>> weights, grads;
  std::map<std::string, std::vector<int64_t>> shapes;  // HF parameter name -> shape
  std::vector<float> logits_row0;                      // [seq, vocab_size], batch row 0

  static ReferenceFixture load(const std::string& dir, const std::string& name) {
    const std::string json_path = dir + "/" + name + ".json";
    const std::string bin_path = dir + "/" + name + ".bin";

    auto fail = [](const std::string& path, const std::string& what) -> std::runtime_error {
      return std::runtime_error("reference fixture " + path + ": " + what);
    };

    // --- JSON ---
    nlohmann::json doc;
    {
      std::ifstream in(json_path);
      if (!in) throw fail(json_path, "cannot open");
      try {
        doc = nlohmann::json::parse(in);
      } catch (const std::exception& e) {
        throw fail(json_path, std::string("malformed JSON: ") + e.what());
      }
    }

    // --- .bin: raw little-endian float32 ---
    std::vector<float> data;
    {
      std::ifstream in(bin_path, std::ios::binary);
      if (!in) throw fail(bin_path, "cannot open");
      std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (in.bad()) throw fail(bin_path, "read error");
      if (bytes.size() % 4 != 0)
        throw fail(bin_path, "size " + std::to_string(bytes.size()) + " bytes is not a multiple of 4");
      data.resize(bytes.size() / 4);
      const uint32_t probe = 1;
      unsigned char first = 0;
      std::memcpy(&first, &probe, 1);
      if (first != 1) {  // big-endian host: swap each 4-byte word
        for (std::size_t i = 0; i < bytes.size(); i += 4) {
          std::swap(bytes[i], bytes[i + 3]);
          std::swap(bytes[i + 1], bytes[i + 2]);
        }
      }
      if (!bytes.empty()) std::memcpy(data.data(), bytes.data(), bytes.size());
    }

    ReferenceFixture fx;
    try {
      fx.config = doc.at("config");
      const auto& b = doc.at("batch");
      fx.batch = b.at("batch").get<int>();
      fx.seq = b.at("seq").get<int>();
      if (fx.batch <= 0 || fx.seq <= 0) throw fail(json_path, "batch and seq must be positive");
      const std::size_t tokens = static_cast<std::size_t>(fx.batch) * static_cast<std::size_t>(fx.seq);
      auto ints = [&](const char* key) {
        auto v = b.at(key).get<std::vector<int32_t>>();
        if (v.size() != tokens)
          throw fail(json_path, std::string("batch.") + key + " has " + std::to_string(v.size()) +
                                    " entries, expected batch*seq = " + std::to_string(tokens));
        return v;
      };
      fx.input_ids = ints("input_ids");
      fx.position_ids = ints("position_ids");
      fx.seq_ids = ints("seq_ids");
      fx.targets = ints("targets");
      fx.loss = doc.at("loss").get<double>();
      fx.num_targets = doc.at("num_targets").get<int64_t>();
      const auto counted = std::count_if(fx.targets.begin(), fx.targets.end(),
                                         [](int32_t t) { return t != -100; });
      if (counted != fx.num_targets)
        throw fail(json_path, "num_targets " + std::to_string(fx.num_targets) + " but targets hold " +
                                  std::to_string(counted) + " non-ignored entries");

      // Tensor table: must tile the .bin exactly, in offset order, without gaps or overlaps.
      struct Entry {
        std::string name, kind;
        std::vector<int64_t> shape;
        int64_t offset, numel;
      };
      std::vector<Entry> entries;
      for (const auto& t : doc.at("tensors")) {
        Entry e{t.at("name").get<std::string>(), t.at("kind").get<std::string>(),
                t.at("shape").get<std::vector<int64_t>>(), t.at("offset").get<int64_t>(), 1};
        for (int64_t s : e.shape) {
          if (s < 0) throw fail(json_path, "tensor " + e.name + " has a negative dimension");
          e.numel *= s;
        }
        if (e.offset < 0) throw fail(json_path, "tensor " + e.name + " has a negative offset");
        entries.push_back(std::move(e));
      }
      std::vector<const Entry*> order;
      for (const auto& e : entries) order.push_back(&e);
      std::sort(order.begin(), order.end(),
                [](const Entry* a, const Entry* c) { return a->offset < c->offset; });
      int64_t expected = 0;
      for (const Entry* e : order) {
        if (e->offset != expected)
          throw fail(bin_path, "tensor " + e->name + " (" + e->kind + ") starts at element " +
                                   std::to_string(e->offset) + ", expected " + std::to_string(expected));
        expected += e->numel;
      }
      if (static_cast<std::size_t>(expected) != data.size())
        throw fail(bin_path, "holds " + std::to_string(data.size()) + " floats but " + json_path +
                                 " describes " + std::to_string(expected));

      for (const auto& e : entries) {
        std::vector<float> v(data.begin() + e.offset, data.begin() + e.offset + e.numel);
        std::map<std::string, std::vector<float>>* dst = nullptr;
        if (e.kind == "weight") {
          dst = &fx.weights;
        } else if (e.kind == "grad") {
          dst = &fx.grads;
        } else if (e.kind == "logits") {
          if (e.name != "logits.row0") continue;  // unknown debug tensors are ignored
          const int64_t vocab = fx.config.at("vocab_size").get<int64_t>();
          if (e.shape != std::vector<int64_t>{fx.seq, vocab})
            throw fail(json_path, "logits.row0 shape is not [seq, vocab_size]");
          fx.logits_row0 = std::move(v);
          continue;
        } else {
          throw fail(json_path, "tensor " + e.name + " has unknown kind '" + e.kind + "'");
        }
        if (!dst->emplace(e.name, std::move(v)).second)
          throw fail(json_path, "duplicate " + e.kind + " for tensor " + e.name);
        auto it = fx.shapes.find(e.name);
        if (it == fx.shapes.end())
          fx.shapes.emplace(e.name, e.shape);
        else if (it->second != e.shape)
          throw fail(json_path, "weight and grad of " + e.name + " have different shapes");
      }
      for (const auto& kv : fx.weights)
        if (!fx.grads.count(kv.first)) throw fail(json_path, "no grad for weight " + kv.first);
      for (const auto& kv : fx.grads)
        if (!fx.weights.count(kv.first)) throw fail(json_path, "no weight for grad " + kv.first);
      if (fx.logits_row0.empty()) throw fail(json_path, "no logits.row0 tensor");
    } catch (const nlohmann::json::exception& e) {
      throw fail(json_path, std::string("unexpected structure: ") + e.what());
    }
    return fx;
  }
};

#endif  // SHARDFT_TESTS_REFERENCE_FIXTURE_HPP
