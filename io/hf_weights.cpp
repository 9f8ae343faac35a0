#include "io/hf_weights.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace shardft {

HfModelWeights::HfModelWeights(const std::string& dir) : dir_(dir) {
  namespace fs = std::filesystem;
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::is_regular_file(index, ec)) {
    description_ = index.string();
    std::ifstream in(index);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      throw FormatError(description_ + ": not valid JSON: " + e.what());
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
      throw FormatError(description_ + ": expected an object with a \"weight_map\" object");
    }
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string()) {
        throw FormatError(description_ + ": weight_map[\"" + it.key() + "\"] must be a file name, got " +
                          it.value().dump());
      }
      const fs::path file = fs::path(dir) / it.value().get<std::string>();
      if (!fs::is_regular_file(file, ec)) {
        throw FormatError(description_ + ": weight_map[\"" + it.key() + "\"] names '" + file.string() +
                          "', which does not exist");
      }
      file_of_[it.key()] = file.string();
    }
  } else if (fs::is_regular_file(single, ec)) {
    description_ = single.string();
    auto reader = std::make_unique<SafetensorsReader>(single.string());
    for (const std::string& name : reader->names()) file_of_[name] = single.string();
    readers_[single.string()] = std::move(reader);
  } else {
    throw FormatError("model directory '" + dir + "' has neither model.safetensors nor model.safetensors.index.json");
  }
  std::vector<std::string> all;
  for (const auto& entry : file_of_) all.push_back(entry.first);
  nf4_ = find_bnb4_weights(all, [this](const std::string& name) -> SafetensorsReader& { return reader_for(name); },
                           description_);
}

std::vector<std::string> HfModelWeights::names() const {
  std::vector<std::string> out;
  for (const auto& entry : file_of_) {
    if (nf4_.empty() || bnb4_weight_of(entry.first).empty()) out.push_back(entry.first);  // companions are part of their weight
  }
  return out;
}

SafetensorsReader& HfModelWeights::reader_for(const std::string& name) {
  auto it = file_of_.find(name);
  if (it == file_of_.end()) throw FormatError(description_ + ": no tensor named '" + name + "'");
  auto& reader = readers_[it->second];
  if (!reader) reader = std::make_unique<SafetensorsReader>(it->second);
  if (!reader->has(name)) {
    throw FormatError(description_ + " maps '" + name + "' to '" + it->second + "', which does not hold it");
  }
  return *reader;
}

const std::vector<std::int64_t>& HfModelWeights::shape(const std::string& name) {
  const auto q = nf4_.find(name);
  return q != nf4_.end() ? q->second.shape : reader_for(name).info(name).shape;
}

void HfModelWeights::read(const std::string& name, std::int64_t first, std::int64_t count, float* out) {
  const auto q = nf4_.find(name);
  if (q == nf4_.end()) {
    reader_for(name).read(name, first, count, out);
    return;
  }
  if (first < 0 || count < 0 || first + count > q->second.numel) {
    throw FormatError(description_ + ": tensor '" + name + "': elements [" + std::to_string(first) + ", " +
                      std::to_string(first + count) + ") out of its " + std::to_string(q->second.numel));
  }
  View1<float> values("bnb4_dequantized", q->second.numel);
  nf4_dequantize(read_nf4(name), values);
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), values);
  std::copy_n(host.data() + first, count, out);
}

Nf4Tensor HfModelWeights::read_nf4(const std::string& name) {
  const auto q = nf4_.find(name);
  if (q == nf4_.end()) throw FormatError(description_ + ": tensor '" + name + "' is not a bitsandbytes 4-bit weight");
  return read_bnb4_weight(name, q->second, [this](const std::string& t) -> SafetensorsReader& { return reader_for(t); });
}

}  // namespace shardft
