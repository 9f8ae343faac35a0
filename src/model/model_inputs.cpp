#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/device_traffic.hpp"
#include "kernels/embedding.hpp"
#include "model/decoder.hpp"

namespace shardft {

namespace {
void check_count(const char* name, const std::vector<std::int32_t>& host, std::size_t n) {
  if (host.size() != n) {
    throw std::invalid_argument(std::string("upload_inputs: ") + name + " holds " + std::to_string(host.size()) +
                                " tokens, expected batch*seq = " + std::to_string(n));
  }
}

void copy_up(const std::vector<std::int32_t>& host, const View1<std::int32_t>& dev) {
  Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> src(host.data(),
                                                                                                   host.size());
  Kokkos::deep_copy(dev, src);
  count_input_upload(host.size() * sizeof(std::int32_t));
}

View1<std::int32_t> upload(const char* name, const std::vector<std::int32_t>& host, std::size_t n) {
  check_count(name, host, n);
  View1<std::int32_t> dev(std::string(name), n);
  copy_up(host, dev);
  return dev;
}

View1<std::int32_t> upload(const char* name, const std::vector<std::int32_t>& host, std::size_t n,
                           GrowingBufferOf<std::int32_t>& buffer) {
  check_count(name, host, n);
  View1<std::int32_t> dev = buffer.shared_vec(static_cast<std::int64_t>(n));
  copy_up(host, dev);
  return dev;
}

// Every input id in [0, vocab) and every target -100 or in it.
void check_ids(const std::vector<std::int32_t>& input_ids, const std::vector<std::int32_t>& targets, int vocab_size) {
  check_token_ids(input_ids.data(), input_ids.size(), vocab_size);
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (targets[i] != kIgnoreIndex && (targets[i] < 0 || targets[i] >= vocab_size)) {
      throw std::out_of_range("target " + std::to_string(targets[i]) + " at position " + std::to_string(i) +
                              " is neither " + std::to_string(kIgnoreIndex) + " nor inside the vocabulary [0, " +
                              std::to_string(vocab_size) + ")");
    }
  }
}

// Runs of equal seq_id within each row of `seq` tokens: their starts (flat token indices), then the token
// count. Empty when a row's seq_ids come back to an earlier value after another (attention would then join
// tokens that are not contiguous, which runs cannot describe).
std::vector<std::int32_t> segment_starts(int batch, int seq, const std::vector<std::int32_t>& seq_ids) {
  std::vector<std::int32_t> starts;
  for (int b = 0; b < batch; ++b) {
    const std::int32_t* row = seq_ids.data() + static_cast<std::size_t>(b) * seq;
    std::vector<std::int32_t> seen;
    for (int t = 0; t < seq; ++t) {
      if (t > 0 && row[t] == row[t - 1]) continue;
      if (std::find(seen.begin(), seen.end(), row[t]) != seen.end()) return {};
      seen.push_back(row[t]);
      starts.push_back(b * seq + t);
    }
  }
  starts.push_back(batch * seq);
  return starts;
}

// The segments' count, longest run and a new version number from their starts (segment_starts); false,
// leaving in's segments unknown, where there are none.
bool describe_segments(ModelInputs& in, const std::vector<std::int32_t>& starts) {
  static std::uint64_t uploads = 0;
  if (starts.size() < 2) return false;
  in.segments_version = ++uploads;
  in.segments = static_cast<int>(starts.size()) - 1;
  in.max_segment = 0;
  for (std::size_t i = 0; i + 1 < starts.size(); ++i) in.max_segment = std::max(in.max_segment, starts[i + 1] - starts[i]);
  return true;
}

// The segments of a batch (ModelInputs::segment_starts), uploaded into a view of their own.
void set_segments(ModelInputs& in, const std::vector<std::int32_t>& seq_ids) {
  const std::vector<std::int32_t> starts = segment_starts(in.batch, in.seq, seq_ids);
  if (!describe_segments(in, starts)) return;
  in.segment_starts = View1<std::int32_t>("segment_starts", starts.size());
  copy_up(starts, in.segment_starts);
}

View1<std::int32_t> part(const View1<std::int32_t>& all, std::size_t from, std::size_t count) {
  return Kokkos::subview(all, std::make_pair(static_cast<std::int64_t>(from), static_cast<std::int64_t>(from + count)));
}

int position_limit(const std::vector<std::int32_t>& position_ids) {
  std::int32_t top = -1;
  for (const std::int32_t p : position_ids) top = std::max(top, p);
  return top + 1;
}

}  // namespace

ModelInputs upload_inputs(int batch, int seq, const std::vector<std::int32_t>& input_ids,
                          const std::vector<std::int32_t>& position_ids, const std::vector<std::int32_t>& seq_ids,
                          const std::vector<std::int32_t>& targets, int vocab_size) {
  check_ids(input_ids, targets, vocab_size);
  ModelInputs in = upload_inputs(batch, seq, input_ids, position_ids, seq_ids, targets);
  in.checked_vocab = vocab_size;
  return in;
}

ModelInputs upload_inputs(int batch, int seq, const std::vector<std::int32_t>& input_ids,
                          const std::vector<std::int32_t>& position_ids, const std::vector<std::int32_t>& seq_ids,
                          const std::vector<std::int32_t>& targets) {
  const std::size_t n = static_cast<std::size_t>(batch) * static_cast<std::size_t>(seq);
  ModelInputs in;
  in.batch = batch;
  in.seq = seq;
  in.input_ids = upload("input_ids", input_ids, n);
  in.position_ids = upload("position_ids", position_ids, n);
  in.position_limit = position_limit(position_ids);
  in.seq_ids = upload("seq_ids", seq_ids, n);
  in.targets = upload("targets", targets, n);
  set_segments(in, seq_ids);
  return in;
}

ModelInputs upload_inputs(int batch, int seq, const std::vector<std::int32_t>& input_ids,
                          const std::vector<std::int32_t>& position_ids, const std::vector<std::int32_t>& seq_ids,
                          const std::vector<std::int32_t>& targets, int vocab_size, InputBuffers& buffers) {
  check_ids(input_ids, targets, vocab_size);
  const std::size_t n = static_cast<std::size_t>(batch) * static_cast<std::size_t>(seq);
  check_count("input_ids", input_ids, n);
  check_count("position_ids", position_ids, n);
  check_count("seq_ids", seq_ids, n);
  check_count("targets", targets, n);
  ModelInputs in;
  in.batch = batch;
  in.seq = seq;
  in.position_limit = position_limit(position_ids);
  in.checked_vocab = vocab_size;
  const std::vector<std::int32_t> starts = segment_starts(batch, seq, seq_ids);
  const bool segmented = describe_segments(in, starts);
  // One copy up, in the step's stream order (the micro-batch before has finished reading the buffer by
  // then): [input_ids | position_ids | seq_ids | targets | segment starts].
  std::vector<std::int32_t>& host = buffers.staging;
  host.clear();
  for (const auto* v : {&input_ids, &position_ids, &seq_ids, &targets}) host.insert(host.end(), v->begin(), v->end());
  if (segmented) host.insert(host.end(), starts.begin(), starts.end());
  const View1<std::int32_t> all = buffers.packed.shared_vec(static_cast<std::int64_t>(host.size()));
  Kokkos::deep_copy(ExecSpace(), all,
                    Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                        host.data(), host.size()));
  count_input_upload(host.size() * sizeof(std::int32_t));
  in.input_ids = part(all, 0, n);
  in.position_ids = part(all, n, n);
  in.seq_ids = part(all, 2 * n, n);
  in.targets = part(all, 3 * n, n);
  if (segmented) in.segment_starts = part(all, 4 * n, starts.size());
  return in;
}

void upload_sample_ids(ModelInputs& in, const std::vector<std::int32_t>& sample_ids, InputBuffers* buffers) {
  if (sample_ids.empty()) return;
  const std::size_t n = static_cast<std::size_t>(in.batch) * static_cast<std::size_t>(in.seq);
  in.sample_ids = buffers ? upload("sample_ids", sample_ids, n, buffers->sample_ids) : upload("sample_ids", sample_ids, n);
}

}  // namespace shardft
