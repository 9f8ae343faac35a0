#include "kernels/embedding.hpp"

#include <stdexcept>
#include <string>

namespace shardft {

void embedding_forward(Unmanaged1<const std::int32_t> ids, Unmanaged2<const float> table, Unmanaged2<float> out) {
  const int d = static_cast<int>(table.extent(1));
  Kokkos::parallel_for(
      "embedding_forward", Range(0, ids.extent(0)), KOKKOS_LAMBDA(const std::int64_t n) {
        const std::int32_t t = ids(n);
        for (int j = 0; j < d; ++j) out(n, j) = table(t, j);
      });
}

void embedding_backward(Unmanaged1<const std::int32_t> ids, Unmanaged2<const float> dout, Unmanaged2<float> dtable) {
  // Columns in parallel, tokens in order: repeated ids never race and the sum order is fixed.
  const std::int64_t tokens = static_cast<std::int64_t>(ids.extent(0));
  Kokkos::parallel_for(
      "embedding_backward", Range(0, dtable.extent(1)), KOKKOS_LAMBDA(const std::int64_t j) {
        for (std::int64_t n = 0; n < tokens; ++n) dtable(ids(n), j) += dout(n, j);
      });
}

void check_token_ids(Unmanaged1<const std::int32_t> ids, int vocab) {
  // Ids come from the host-side batch; checking a host mirror keeps the error message exact.
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ids);
  for (std::size_t n = 0; n < host.extent(0); ++n) {
    if (host(n) < 0 || host(n) >= vocab) {
      throw std::out_of_range("token id " + std::to_string(host(n)) + " at position " + std::to_string(n) +
                              " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
}

}  // namespace shardft
