#include "io/safetensors.hpp"

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "kernels/bf16.hpp"

namespace shardft {

namespace {
// IEEE binary16 -> fp32, subnormals and specials included.
float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      std::uint32_t m = mant;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// fp32 -> IEEE binary16, round to nearest even.
std::uint16_t float_to_half(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const int exp = static_cast<int>((x >> 23) & 0xffu) - 127 + 15;
  std::uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xffu) == 0xffu) return static_cast<std::uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (exp <= 0) {
    if (exp < -10) return static_cast<std::uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - exp;
    std::uint32_t half = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t half = (static_cast<std::uint32_t>(exp) << 10) | (mant >> 13);
  const std::uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into the exponent: correct
  return static_cast<std::uint16_t>(sign | half);
}
}  // namespace

const char* dtype_tag(TensorDtype t) {
  return t == TensorDtype::F32 ? "F32" : t == TensorDtype::BF16 ? "BF16" : t == TensorDtype::F16 ? "F16" : "U8";
}
std::size_t dtype_bytes(TensorDtype t) { return t == TensorDtype::F32 ? 4 : t == TensorDtype::U8 ? 1 : 2; }

std::int64_t TensorEntry::numel() const {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

SafetensorsStreamWriter::SafetensorsStreamWriter(const std::string& path, std::vector<TensorEntry> tensors,
                                                 TensorDtype dtype)
    : path_(path), tensors_(std::move(tensors)), dtype_(dtype) {
  if (dtype == TensorDtype::U8) throw std::invalid_argument(path + ": weights are written as F32, BF16 or F16, not U8");
  // transformers' from_pretrained reads __metadata__.format and fails on a file without one.
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
  std::uint64_t offset = 0;
  for (const auto& t : tensors_) {
    const std::uint64_t bytes = static_cast<std::uint64_t>(t.numel()) * dtype_bytes(dtype);
    header[t.name] = {{"dtype", dtype_tag(dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  data_bytes_ = offset;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  out_ = std::fopen((path + ".tmp").c_str(), "wb");
  if (!out_) throw FormatError("cannot write '" + path + ".tmp': " + std::strerror(errno));
  const std::uint64_t len = text.size();
  std::fwrite(&len, 8, 1, out_);
  std::fwrite(text.data(), 1, text.size(), out_);
}

SafetensorsStreamWriter::~SafetensorsStreamWriter() {
  if (out_) {
    std::fclose(out_);
    std::remove((path_ + ".tmp").c_str());  // never leave a partial file behind
  }
}

void SafetensorsStreamWriter::write_next(const float* data) {
  if (next_ >= tensors_.size()) throw FormatError(path_ + ": more tensors written than declared");
  const std::size_t n = static_cast<std::size_t>(tensors_[next_++].numel());
  if (dtype_ == TensorDtype::F32) {
    std::fwrite(data, 4, n, out_);
    return;
  }
  std::vector<std::uint16_t> half(n);
  for (std::size_t i = 0; i < n; ++i) half[i] = dtype_ == TensorDtype::BF16 ? bf16::round_bits(data[i]) : float_to_half(data[i]);
  std::fwrite(half.data(), 2, n, out_);
}

void SafetensorsStreamWriter::finish() {
  if (next_ != tensors_.size()) throw FormatError(path_ + ": " + std::to_string(tensors_.size() - next_) + " tensors not written");
  // A write that failed on the way (a full disk, a file-size limit) leaves the stream in error.
  const bool ok = std::fflush(out_) == 0 && !std::ferror(out_) && ::fsync(fileno(out_)) == 0;
  const int err = errno;
  std::fclose(out_);
  out_ = nullptr;
  if (!ok || std::rename((path_ + ".tmp").c_str(), path_.c_str()) != 0) {
    const int why = ok ? errno : err;
    std::remove((path_ + ".tmp").c_str());  // never leave a partial file behind
    throw FormatError("cannot complete '" + path_ + "': " + std::strerror(why));
  }
}

void write_safetensors_f32(const std::string& path, const std::vector<NamedTensorRef>& tensors) {
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};  // as transformers expects
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
    if (!out) {
      const int why = errno;
      out.close();
      std::remove(tmp.c_str());  // never leave a partial file behind
      throw FormatError("write to '" + tmp + "' failed: " + std::strerror(why));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw FormatError("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
  }
}

SafetensorsReader::SafetensorsReader(const std::string& path) : path_(path) {
  in_.open(path, std::ios::binary | std::ios::ate);
  if (!in_) throw FormatError("cannot open '" + path + "': " + std::strerror(errno));
  const std::uint64_t file_size = static_cast<std::uint64_t>(in_.tellg());
  in_.seekg(0);
  std::uint64_t len = 0;
  if (file_size < 8 || !in_.read(reinterpret_cast<char*>(&len), 8) || len > file_size - 8) {
    throw FormatError(path + ": not a safetensors file (header length out of bounds)");
  }
  std::string text(len, '\0');
  in_.read(text.data(), static_cast<std::streamsize>(len));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw FormatError(path + ": header is not JSON: " + e.what());
  }
  if (!header.is_object()) throw FormatError(path + ": header is not a JSON object");
  data_start_ = 8 + len;
  const std::uint64_t data_size = file_size - data_start_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& h = it.value();
    const std::string where = path + ": tensor '" + it.key() + "'";
    if (!h.is_object() || !h.contains("dtype") || !h.contains("shape") || !h.contains("data_offsets")) {
      throw FormatError(where + ": expected dtype, shape and data_offsets");
    }
    const std::string tag = h["dtype"].is_string() ? h["dtype"].get<std::string>() : "";
    Info info;
    if (tag == "F32") {
      info.dtype = TensorDtype::F32;
    } else if (tag == "BF16") {
      info.dtype = TensorDtype::BF16;
    } else if (tag == "F16") {
      info.dtype = TensorDtype::F16;
    } else if (tag == "U8") {
      info.dtype = TensorDtype::U8;
    } else {
      throw FormatError(where + ": dtype " + h["dtype"].dump() + " is not supported (F32, BF16, F16, U8)");
    }
    if (!h["shape"].is_array()) throw FormatError(where + ": shape must be an array of integers");
    std::uint64_t n = 1;
    bool overflow = false, empty = false;
    for (const auto& dim : h["shape"]) {
      if (!dim.is_number_integer() || dim.get<std::int64_t>() < 0) {
        throw FormatError(where + ": shape must be an array of non-negative integers, got " + h["shape"].dump());
      }
      info.shape.push_back(dim.get<std::int64_t>());
      empty |= info.shape.back() == 0;
      overflow |= __builtin_mul_overflow(n, static_cast<std::uint64_t>(info.shape.back()), &n);
    }
    // A product that wraps around could otherwise match a small byte length and claim 2^62 elements.
    if (empty) {
      n = 0;
    } else if (overflow || n > data_size / dtype_bytes(info.dtype)) {
      throw FormatError(where + ": shape " + h["shape"].dump() + " needs more bytes than the data section holds (" +
                        std::to_string(data_size) + ")");
    }
    const auto& off = h["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      throw FormatError(where + ": data_offsets must be [begin, end], got " + off.dump());
    }
    info.begin = off[0].get<std::uint64_t>();
    const std::uint64_t end = off[1].get<std::uint64_t>();
    if (info.begin > end || end > data_size) throw FormatError(where + ": data_offsets out of bounds");
    if (end - info.begin != dtype_bytes(info.dtype) * n) {
      throw FormatError(where + ": dtype x shape does not match its byte length");
    }
    spans.emplace_back(info.begin, end);
    info.numel = static_cast<std::int64_t>(n);
    tensors_.emplace(it.key(), std::move(info));
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) throw FormatError(path + ": tensors overlap in the data section");
  }
}

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::string> out;
  for (const auto& entry : tensors_) out.push_back(entry.first);
  return out;
}

const SafetensorsReader::Info& SafetensorsReader::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw FormatError(path_ + ": no tensor named '" + name + "'");
  return it->second;
}

void SafetensorsReader::read(const std::string& name, std::int64_t first, std::int64_t count, float* out) {
  const Info& t = info(name);
  if (first < 0 || count < 0 || first + count > t.numel) {
    throw FormatError(path_ + ": tensor '" + name + "': elements [" + std::to_string(first) + ", " +
                      std::to_string(first + count) + ") out of its " + std::to_string(t.numel));
  }
  if (t.dtype == TensorDtype::U8) {
    throw FormatError(path_ + ": tensor '" + name + "' holds bytes (U8), not weights (F32, BF16 or F16)");
  }
  const std::size_t elem = dtype_bytes(t.dtype);
  in_.seekg(static_cast<std::streamoff>(data_start_ + t.begin + elem * static_cast<std::uint64_t>(first)));
  if (t.dtype == TensorDtype::F32) {
    in_.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(4 * count));
  } else {
    std::vector<std::uint16_t> half(static_cast<std::size_t>(count));
    in_.read(reinterpret_cast<char*>(half.data()), static_cast<std::streamsize>(2 * count));
    for (std::int64_t i = 0; i < count; ++i) {
      out[i] = t.dtype == TensorDtype::BF16 ? bf16::to_float(half[i]) : half_to_float(half[i]);
    }
  }
  if (!in_) throw FormatError(path_ + ": tensor '" + name + "': file is truncated");
}

std::vector<std::uint8_t> SafetensorsReader::read_bytes(const std::string& name) {
  const Info& t = info(name);
  if (t.dtype != TensorDtype::U8) {
    throw FormatError(path_ + ": tensor '" + name + "' is " + dtype_tag(t.dtype) + ", expected U8 bytes");
  }
  std::vector<std::uint8_t> out(static_cast<std::size_t>(t.numel));
  in_.seekg(static_cast<std::streamoff>(data_start_ + t.begin));
  in_.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
  if (!in_) throw FormatError(path_ + ": tensor '" + name + "': file is truncated");
  return out;
}

std::map<std::string, TensorF32> read_safetensors_f32(const std::string& path) {
  SafetensorsReader reader(path);
  std::map<std::string, TensorF32> out;
  for (const std::string& name : reader.names()) {
    TensorF32 t;
    t.shape = reader.info(name).shape;
    t.data.resize(static_cast<std::size_t>(reader.info(name).numel));
    reader.read(name, 0, reader.info(name).numel, t.data.data());
    out.emplace(name, std::move(t));
  }
  return out;
}

}  // namespace shardft
