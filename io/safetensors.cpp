#include "io/safetensors.hpp"

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace shardft {

void write_safetensors_f32(const std::string& path, const std::vector<NamedTensorRef>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    std::uint64_t n = 1;
    for (auto s : t.shape) n *= static_cast<std::uint64_t>(s);
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + 4 * n}}};
    offset += 4 * n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw FormatError("cannot write '" + tmp + "': " + std::strerror(errno));
    const std::uint64_t len = text.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : tensors) {
      std::uint64_t n = 1;
      for (auto s : t.shape) n *= static_cast<std::uint64_t>(s);
      out.write(reinterpret_cast<const char*>(t.data), static_cast<std::streamsize>(4 * n));
    }
    out.flush();
    if (!out) throw FormatError("write to '" + tmp + "' failed: " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw FormatError("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
  }
}

std::map<std::string, TensorF32> read_safetensors_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw FormatError("cannot open '" + path + "': " + std::strerror(errno));
  const std::uint64_t file_size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  std::uint64_t len = 0;
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(&len), 8) || len > file_size - 8) {
    throw FormatError(path + ": not a safetensors file (header length out of bounds)");
  }
  std::string text(len, '\0');
  in.read(text.data(), static_cast<std::streamsize>(len));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw FormatError(path + ": header is not JSON: " + e.what());
  }
  const std::uint64_t data_size = file_size - 8 - len;
  std::map<std::string, TensorF32> out;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& h = it.value();
    const std::string where = path + ": tensor '" + it.key() + "'";
    if (!h.is_object() || !h.contains("dtype") || !h.contains("shape") || !h.contains("data_offsets")) {
      throw FormatError(where + ": expected dtype, shape and data_offsets");
    }
    if (h["dtype"] != "F32") throw FormatError(where + ": dtype " + h["dtype"].dump() + " is not supported here (F32)");
    TensorF32 t;
    t.shape = h["shape"].get<std::vector<std::int64_t>>();
    std::uint64_t n = 1;
    for (auto s : t.shape) {
      if (s < 0) throw FormatError(where + ": negative dimension");
      n *= static_cast<std::uint64_t>(s);
    }
    const auto off = h["data_offsets"].get<std::vector<std::uint64_t>>();
    if (off.size() != 2 || off[0] > off[1] || off[1] > data_size) throw FormatError(where + ": data_offsets out of bounds");
    if (off[1] - off[0] != 4 * n) throw FormatError(where + ": dtype x shape does not match its byte length");
    spans.emplace_back(off[0], off[1]);
    t.data.resize(n);
    in.seekg(static_cast<std::streamoff>(8 + len + off[0]));
    in.read(reinterpret_cast<char*>(t.data.data()), static_cast<std::streamsize>(4 * n));
    if (!in) throw FormatError(where + ": file is truncated");
    out.emplace(it.key(), std::move(t));
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) throw FormatError(path + ": tensors overlap in the data section");
  }
  return out;
}

}  // namespace shardft
