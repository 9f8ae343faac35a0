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
  return in;
}

ModelInputs upload_inputs(int batch, int seq, const std::vector<std::int32_t>& input_ids,
                          const std::vector<std::int32_t>& position_ids, const std::vector<std::int32_t>& seq_ids,
                          const std::vector<std::int32_t>& targets, int vocab_size, InputBuffers& buffers) {
  check_ids(input_ids, targets, vocab_size);
  const std::size_t n = static_cast<std::size_t>(batch) * static_cast<std::size_t>(seq);
  ModelInputs in;
  in.batch = batch;
  in.seq = seq;
  in.input_ids = upload("input_ids", input_ids, n, buffers.input_ids);
  in.position_ids = upload("position_ids", position_ids, n, buffers.position_ids);
  in.position_limit = position_limit(position_ids);
  in.seq_ids = upload("seq_ids", seq_ids, n, buffers.seq_ids);
  in.targets = upload("targets", targets, n, buffers.targets);
  in.checked_vocab = vocab_size;
  return in;
}

void upload_sample_ids(ModelInputs& in, const std::vector<std::int32_t>& sample_ids, InputBuffers* buffers) {
  if (sample_ids.empty()) return;
  const std::size_t n = static_cast<std::size_t>(in.batch) * static_cast<std::size_t>(in.seq);
  in.sample_ids = buffers ? upload("sample_ids", sample_ids, n, buffers->sample_ids) : upload("sample_ids", sample_ids, n);
}

}  // namespace shardft
