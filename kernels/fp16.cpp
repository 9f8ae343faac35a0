#include "kernels/fp16.hpp"

namespace shardft {

void round_to_fp16(Unmanaged1<const float> src, Unmanaged1<float> dst) {
  Kokkos::parallel_for(
      "round_to_fp16", Range(0, src.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) { dst(i) = round_to_fp16(src(i)); });
}

}  // namespace shardft
