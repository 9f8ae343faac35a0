#include <stdexcept>

#include "model/decoder.hpp"

namespace shardft {

namespace {
View1<std::int32_t> upload(const char* name, const std::vector<std::int32_t>& host, std::size_t n) {
  if (host.size() != n) {
    throw std::invalid_argument(std::string("upload_inputs: ") + name + " holds " + std::to_string(host.size()) +
                                " tokens, expected batch*seq = " + std::to_string(n));
  }
  View1<std::int32_t> dev(std::string(name), n);
  Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> src(host.data(), n);
  Kokkos::deep_copy(dev, src);
  return dev;
}
}  // namespace

ModelInputs upload_inputs(int batch, int seq, const std::vector<std::int32_t>& input_ids,
                          const std::vector<std::int32_t>& position_ids, const std::vector<std::int32_t>& seq_ids,
                          const std::vector<std::int32_t>& targets) {
  const std::size_t n = static_cast<std::size_t>(batch) * static_cast<std::size_t>(seq);
  ModelInputs in;
  in.batch = batch;
  in.seq = seq;
  in.input_ids = upload("input_ids", input_ids, n);
  in.position_ids = upload("position_ids", position_ids, n);
  in.seq_ids = upload("seq_ids", seq_ids, n);
  in.targets = upload("targets", targets, n);
  return in;
}

}  // namespace shardft
