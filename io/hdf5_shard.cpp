#include "io/hdf5_shard.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "io/digest64.hpp"

namespace shardft {

std::uint64_t checksum64(const void* data, std::size_t bytes, std::uint64_t h) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

namespace {

void write_string_attr(hid_t obj, const std::string& key, const std::string& value) {
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, value.empty() ? 1 : value.size());
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(obj, key.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attr, type, value.empty() ? "" : value.c_str());
  H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
}

herr_t collect_attr(hid_t obj, const char* name, const H5A_info_t*, void* out) {
  hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
  hid_t type = H5Aget_type(attr);
  const std::size_t size = H5Tget_size(type);
  std::string value(size, '\0');
  hid_t mem = H5Tcopy(H5T_C_S1);
  H5Tset_size(mem, size);
  H5Aread(attr, mem, value.data());
  while (!value.empty() && value.back() == '\0') value.pop_back();
  (*static_cast<Attributes*>(out))[name] = value;
  H5Tclose(mem);
  H5Tclose(type);
  H5Aclose(attr);
  return 0;
}

template <class T>
void write_dataset(long long file, const std::string& path, const std::string& name, hid_t type, const T* data,
                   std::size_t n, Attributes attrs) {
  attrs["checksum"] = digest_text(DigestAlgorithm::xxh3_64, data, n * sizeof(T));
  attrs["length"] = std::to_string(n);
  const hsize_t dims[1] = {static_cast<hsize_t>(n)};
  hid_t space = H5Screate_simple(1, dims, nullptr);
  hid_t set = H5Dcreate2(static_cast<hid_t>(file), name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (set < 0 || (n > 0 && H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)) {
    throw FormatError(path + ": cannot write dataset '" + name + "'");
  }
  for (const auto& [k, v] : attrs) write_string_attr(set, k, v);
  H5Dclose(set);
  H5Sclose(space);
}

}  // namespace

Hdf5ShardWriter::Hdf5ShardWriter(const std::string& path) : path_(path) {
  file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file_ < 0) throw FormatError("cannot create HDF5 file '" + path + "'");
}

Hdf5ShardWriter::~Hdf5ShardWriter() {
  if (file_ >= 0) H5Fclose(static_cast<hid_t>(file_));
}

void Hdf5ShardWriter::write_f32(const std::string& name, const float* data, std::size_t n, Attributes attrs) {
  attrs["dtype"] = "F32";
  write_dataset(file_, path_, name, H5T_NATIVE_FLOAT, data, n, std::move(attrs));
}

void Hdf5ShardWriter::write_i64(const std::string& name, const std::int64_t* data, std::size_t n, Attributes attrs) {
  attrs["dtype"] = "I64";
  write_dataset(file_, path_, name, H5T_NATIVE_INT64, data, n, std::move(attrs));
}

void Hdf5ShardWriter::write_i32(const std::string& name, const std::int32_t* data, std::size_t n, Attributes attrs) {
  attrs["dtype"] = "I32";
  write_dataset(file_, path_, name, H5T_NATIVE_INT32, data, n, std::move(attrs));
}

void Hdf5ShardWriter::close() {
  if (file_ < 0) return;
  if (H5Fclose(static_cast<hid_t>(file_)) < 0) throw FormatError("cannot close HDF5 file '" + path_ + "'");
  file_ = -1;
  const int fd = ::open(path_.c_str(), O_RDONLY);
  if (fd < 0 || ::fsync(fd) != 0) {
    if (fd >= 0) ::close(fd);
    throw FormatError("cannot fsync '" + path_ + "'");
  }
  ::close(fd);
}

Hdf5ShardReader::Hdf5ShardReader(const std::string& path) : path_(path) {
  H5E_BEGIN_TRY { file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); }
  H5E_END_TRY;
  if (file_ < 0) throw FormatError("cannot open checkpoint shard '" + path + "' (missing or not HDF5)");
}

Hdf5ShardReader::~Hdf5ShardReader() {
  if (file_ >= 0) H5Fclose(static_cast<hid_t>(file_));
}

namespace {
hid_t open_set(long long file, const std::string& path, const std::string& name) {
  hid_t set;
  H5E_BEGIN_TRY { set = H5Dopen2(static_cast<hid_t>(file), name.c_str(), H5P_DEFAULT); }
  H5E_END_TRY;
  if (set < 0) throw FormatError(path + ": dataset '" + name + "' is missing");
  return set;
}
}  // namespace

std::size_t Hdf5ShardReader::length(const std::string& name) const {
  hid_t set = open_set(file_, path_, name);
  hid_t space = H5Dget_space(set);
  hsize_t dims[1] = {0};
  H5Sget_simple_extent_dims(space, dims, nullptr);
  H5Sclose(space);
  H5Dclose(set);
  return static_cast<std::size_t>(dims[0]);
}

Attributes Hdf5ShardReader::attributes(const std::string& name) const {
  hid_t set = open_set(file_, path_, name);
  Attributes out;
  H5Aiterate2(set, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_attr, &out);
  H5Dclose(set);
  return out;
}

void Hdf5ShardReader::read_f32(const std::string& name, std::size_t offset, std::size_t n, float* out) const {
  if (n == 0) return;
  hid_t set = open_set(file_, path_, name);
  hid_t space = H5Dget_space(set);
  const hsize_t start[1] = {offset}, count[1] = {n};
  hid_t mem = H5Screate_simple(1, count, nullptr);
  herr_t ok = H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  if (ok >= 0) {
    H5E_BEGIN_TRY { ok = H5Dread(set, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, out); }
    H5E_END_TRY;
  }
  H5Sclose(mem);
  H5Sclose(space);
  H5Dclose(set);
  if (ok < 0) {
    throw FormatError(path_ + ": dataset '" + name + "': cannot read elements " + std::to_string(offset) + ".." +
                      std::to_string(offset + n) + " (truncated or damaged file)");
  }
}

namespace {
template <class T>
std::vector<T> read_whole(long long file, const std::string& path, const std::string& name, std::size_t n, hid_t type) {
  std::vector<T> out(n);
  if (out.empty()) return out;
  hid_t set = open_set(file, path, name);
  herr_t ok;
  H5E_BEGIN_TRY { ok = H5Dread(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()); }
  H5E_END_TRY;
  H5Dclose(set);
  if (ok < 0) throw FormatError(path + ": dataset '" + name + "' cannot be read (truncated or damaged file)");
  return out;
}
}  // namespace

std::vector<std::int64_t> Hdf5ShardReader::read_i64(const std::string& name) const {
  return read_whole<std::int64_t>(file_, path_, name, length(name), H5T_NATIVE_INT64);
}

std::vector<std::int32_t> Hdf5ShardReader::read_i32(const std::string& name) const {
  return read_whole<std::int32_t>(file_, path_, name, length(name), H5T_NATIVE_INT32);
}

bool Hdf5ShardReader::has(const std::string& name) const {
  htri_t found;
  H5E_BEGIN_TRY { found = H5Lexists(static_cast<hid_t>(file_), name.c_str(), H5P_DEFAULT); }
  H5E_END_TRY;
  return found > 0;
}

void Hdf5ShardReader::verify(const std::string& name, std::size_t chunk_bytes) const {
  const Attributes attrs = attributes(name);
  const auto it = attrs.find("checksum");
  if (it == attrs.end()) throw FormatError(path_ + ": dataset '" + name + "': no checksum attribute");
  const std::size_t n = length(name);
  const auto len = attrs.find("length");
  if (len != attrs.end() && len->second != std::to_string(n)) {
    throw FormatError(path_ + ": dataset '" + name + "': " + std::to_string(n) + " elements, its length attribute says " +
                      len->second + " (truncated or damaged file)");
  }
  const std::string dtype = attrs.count("dtype") ? attrs.at("dtype") : "F32";
  const hid_t type = dtype == "I64" ? H5T_NATIVE_INT64 : dtype == "I32" ? H5T_NATIVE_INT32 : H5T_NATIVE_FLOAT;
  const std::size_t elem = H5Tget_size(type);
  // A bounded buffer: verifying a multi-GB shard must not hold a second copy of it in memory.
  const std::size_t per_chunk = std::max<std::size_t>(1, chunk_bytes / elem);
  std::vector<unsigned char> buf(std::min(n, per_chunk) * elem);
  // "xxh3_64:<hex>" since checkpoint format 3; before, FNV-1a 64 in decimal.
  DigestAlgorithm algorithm = DigestAlgorithm::fnv1a64;
  const bool named = digest_algorithm_of(it->second, &algorithm);
  Digest64 got(algorithm);
  if (n > 0) {
    hid_t set = open_set(file_, path_, name);
    hid_t space = H5Dget_space(set);
    herr_t ok = 0;
    for (std::size_t at = 0; at < n && ok >= 0; at += per_chunk) {
      const hsize_t start[1] = {at}, count[1] = {std::min(per_chunk, n - at)};
      hid_t mem = H5Screate_simple(1, count, nullptr);
      ok = H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
      if (ok >= 0) {
        H5E_BEGIN_TRY { ok = H5Dread(set, type, mem, space, H5P_DEFAULT, buf.data()); }
        H5E_END_TRY;
      }
      H5Sclose(mem);
      if (ok >= 0) got.update(buf.data(), static_cast<std::size_t>(count[0]) * elem);
    }
    H5Sclose(space);
    H5Dclose(set);
    if (ok < 0) throw FormatError(path_ + ": dataset '" + name + "': cannot be read (truncated or damaged file)");
  }
  const std::string computed = named ? got.text() : std::to_string(got.value());
  if (computed != it->second) {
    throw FormatError(path_ + ": dataset '" + name + "': checksum mismatch (stored " + it->second + ", computed " +
                      computed + "): the file is damaged");
  }
}

}  // namespace shardft
