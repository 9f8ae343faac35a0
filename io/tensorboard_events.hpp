#pragma once
// TensorBoard event files, written natively (no TensorFlow, no protobuf library): what PyTorch's
// SummaryWriter and HF's TensorBoardCallback write for scalars, which TensorBoard and W&B
// (`wandb sync --sync-tensorboard`) read.
//
// A file is a sequence of TFRecords, each
//   uint64 length (little-endian) | uint32 masked_crc32c(those 8 bytes) | data | uint32 masked_crc32c(data)
// with CRC32C (Castagnoli) masked as ((crc >> 15) | (crc << 17)) + 0xa282ead8. Each record's data is an
// Event protobuf:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// The first record carries file_version "brain.Event:2"; every later one a Summary of scalars at a step.
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace shardft {

// CRC32C of n bytes, continuing from crc (0 to start).
std::uint32_t crc32c(const void* data, std::size_t n, std::uint32_t crc = 0);
std::uint32_t masked_crc32c(const void* data, std::size_t n);

using Scalars = std::vector<std::pair<std::string, double>>;

// The encodings above, for the writer and the tests that check them byte for byte.
std::string tfrecord(const std::string& data);
std::string file_version_event(double wall_time);
std::string scalars_event(double wall_time, std::int64_t step, const Scalars& scalars);

class EventFileWriter {
 public:
  // Creates `dir` (and its parents) and a new file events.out.tfevents.<unix seconds>.<host>.<pid>.shardft
  // in it, starting with the file-version record. Throws std::runtime_error naming the path it could
  // not create or write.
  explicit EventFileWriter(const std::string& dir);
  // One event at `step` holding every scalar (stored as float, as TensorBoard's simple_value is), stamped
  // with the current wall time, flushed to the file so that a running TensorBoard sees it.
  void add_scalars(std::int64_t step, const Scalars& scalars);
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& record);
  std::string path_;
  std::ofstream out_;
};

}  // namespace shardft
