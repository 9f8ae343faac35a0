#pragma once
// One rank's checkpoint shard as an HDF5 file: flat fp32, int32 and int64 datasets, each carrying its own
// attributes (shape, this shard's offset and length, dtype, stage, world size, checksum ...).
// The file is serial HDF5 written by one rank: a file per rank needs no collective I/O, so a slow
// or failed rank never stalls the others inside the library.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.hpp"  // FormatError

namespace shardft {

using Attributes = std::map<std::string, std::string>;  // written as string attributes

// FNV-1a 64 over raw bytes: any flipped byte changes it. `h` continues an earlier call's result, so data
// read in chunks has the checksum of the whole. Datasets carry XXH3-64 since checkpoint format 3
// (io/digest64.hpp); older files' decimal FNV-1a checksums still verify.
// The basis is one digit short of FNV's offset basis (14695981039346656037): a slip kept as it is, since
// format-2 checkpoints and cache keys were made with it.
constexpr std::uint64_t kChecksum64Basis = 1469598103934665603ull;
std::uint64_t checksum64(const void* data, std::size_t bytes, std::uint64_t h = kChecksum64Basis);

class Hdf5ShardWriter {
 public:
  explicit Hdf5ShardWriter(const std::string& path);  // creates (truncates)
  ~Hdf5ShardWriter();
  Hdf5ShardWriter(const Hdf5ShardWriter&) = delete;
  Hdf5ShardWriter& operator=(const Hdf5ShardWriter&) = delete;

  // Adds the "checksum" attribute itself ("xxh3_64:<hex>").
  void write_f32(const std::string& name, const float* data, std::size_t n, Attributes attrs);
  void write_i64(const std::string& name, const std::int64_t* data, std::size_t n, Attributes attrs);
  void write_i32(const std::string& name, const std::int32_t* data, std::size_t n, Attributes attrs);
  // Closes the file and fsyncs it: the data is on disk when this returns.
  void close();

 private:
  std::string path_;
  long long file_ = -1;
};

class Hdf5ShardReader {
 public:
  explicit Hdf5ShardReader(const std::string& path);  // FormatError naming the file when unreadable
  ~Hdf5ShardReader();
  Hdf5ShardReader(const Hdf5ShardReader&) = delete;
  Hdf5ShardReader& operator=(const Hdf5ShardReader&) = delete;

  std::size_t length(const std::string& name) const;
  Attributes attributes(const std::string& name) const;
  // Elements [offset, offset + n) of a dataset.
  void read_f32(const std::string& name, std::size_t offset, std::size_t n, float* out) const;
  std::vector<std::int64_t> read_i64(const std::string& name) const;
  std::vector<std::int32_t> read_i32(const std::string& name) const;
  bool has(const std::string& name) const;
  // Reads the whole dataset in chunks of at most `chunk_bytes` (memory stays bounded whatever its size)
  // and compares with its checksum and length attributes; FormatError "FILE: dataset 'NAME': ...".
  void verify(const std::string& name, std::size_t chunk_bytes = std::size_t{8} << 20) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  long long file_ = -1;
};

}  // namespace shardft
