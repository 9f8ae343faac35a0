#include "io/safetensors_shards.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

namespace shardft {

namespace {
// model.safetensors, model-00001-of-00003.safetensors or model.safetensors.index.json: what an export
// writes (and a later one replaces).
bool is_weight_file(const std::string& name) {
  if (name == "model.safetensors" || name == "model.safetensors.index.json") return true;
  static const std::string shard = "model-00000-of-00000.safetensors";
  if (name.size() != shard.size() || name.compare(0, 6, "model-") != 0 || name.compare(11, 4, "-of-") != 0 ||
      name.compare(20, 12, ".safetensors") != 0) {
    return false;
  }
  for (std::size_t i : {6, 7, 8, 9, 10, 15, 16, 17, 18, 19}) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  return true;
}

std::vector<std::string> remove_stale_weight_files(const std::string& dir, const std::set<std::string>& written) {
  std::vector<std::string> removed;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || !is_weight_file(name) || written.count(name) > 0) continue;
    std::filesystem::remove(e.path());  // throws, naming the path, when it cannot
    removed.push_back(e.path().string());
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

std::string shard_name(std::size_t s, std::size_t count) {
  if (count == 1) return "model.safetensors";
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, count);
  return name;
}
}  // namespace

SafetensorsShardsWriter::SafetensorsShardsWriter(std::string output_dir, std::vector<TensorEntry> tensors,
                                                 TensorDtype dtype, std::uint64_t max_shard_bytes)
    : dir_(std::move(output_dir)), tensors_(std::move(tensors)), dtype_(dtype) {
  std::uint64_t acc = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const std::uint64_t b = static_cast<std::uint64_t>(tensors_[i].numel()) * dtype_bytes(dtype);
    if (i > first && acc + b > max_shard_bytes) {
      shards_.emplace_back(first, i);
      first = i;
      acc = 0;
    }
    acc += b;
  }
  shards_.emplace_back(first, tensors_.size());
}

SafetensorsShardsWriter::~SafetensorsShardsWriter() = default;  // an unfinished file removes its .tmp

void SafetensorsShardsWriter::write_next(const float* values) {
  if (next_ >= tensors_.size()) throw FormatError(dir_ + ": more tensors written than declared");
  const auto [first, last] = shards_[shard_];
  const std::string name = shard_name(shard_, shards_.size());
  if (next_ == first) {
    file_ = std::make_unique<SafetensorsStreamWriter>(
        dir_ + "/" + name,
        std::vector<TensorEntry>(tensors_.begin() + static_cast<long>(first), tensors_.begin() + static_cast<long>(last)),
        dtype_);
  }
  file_->write_next(values);
  weight_map_[tensors_[next_].name] = name;
  rep_.largest_tensor = std::max(rep_.largest_tensor, tensors_[next_].numel());
  ++rep_.tensors;
  if (++next_ < last) return;
  file_->finish();
  rep_.bytes += file_->data_bytes();
  ++rep_.files;
  file_.reset();
  written_.insert(name);
  ++shard_;
}

SafetensorsShardsReport SafetensorsShardsWriter::finish() {
  if (next_ != tensors_.size()) {
    throw FormatError(dir_ + ": " + std::to_string(tensors_.size() - next_) + " tensors not written");
  }
  if (shards_.size() > 1) {
    std::ofstream(dir_ + "/model.safetensors.index.json")
        << nlohmann::json{{"metadata", {{"total_size", rep_.bytes}}}, {"weight_map", weight_map_}}.dump(2) << "\n";
    written_.insert("model.safetensors.index.json");
  }
  rep_.removed = remove_stale_weight_files(dir_, written_);
  return rep_;
}

SafetensorsShardsReport write_safetensors_shards(const std::string& output_dir, const std::vector<TensorEntry>& tensors,
                                                 TensorDtype dtype, std::uint64_t max_shard_bytes,
                                                 const std::function<void(std::size_t, float*)>& fill) {
  SafetensorsShardsWriter out(output_dir, tensors, dtype, max_shard_bytes);
  std::vector<float> buf;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    buf.resize(static_cast<std::size_t>(tensors[i].numel()));  // grows to the largest tensor, no further
    fill(i, buf.data());
    out.write_next(buf.data());
  }
  return out.finish();
}

}  // namespace shardft
