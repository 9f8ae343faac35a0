#include "kernels/uniform_noise.hpp"

#include "kernels/math.hpp"

namespace shardft {

void add_uniform_noise(Unmanaged2<float> x, float magnitude, std::uint64_t stream,
                       Unmanaged1<const std::uint64_t> row_key) {
  const std::int64_t cols = static_cast<std::int64_t>(x.extent(1));
  const float scale = 2.f * magnitude / 16777216.f;  // 24 bits -> [0, 2 magnitude)
  // One element per thread (coalesced on the GPU); the row's hash is recomputed per element.
  Kokkos::parallel_for(
      "add_uniform_noise", Range(0, static_cast<std::int64_t>(x.extent(0)) * cols), KOKKOS_LAMBDA(const std::int64_t i) {
        const std::int64_t n = i / cols, c = i % cols;
        const std::uint64_t h =
            kmath::splitmix64(kmath::splitmix64(stream ^ kmath::splitmix64(row_key(n))) ^ static_cast<std::uint64_t>(c));
        x(n, c) += static_cast<float>(h >> 40) * scale - magnitude;
      });
}

}  // namespace shardft
