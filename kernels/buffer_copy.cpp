#include "kernels/buffer_copy.hpp"

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>

#include "kernels/types.hpp"

namespace shardft {

void copy_buffer_bytes(void* dst, const void* src, std::size_t bytes) {
  if (dst == src || bytes == 0) return;
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    std::memmove(dst, src, bytes);
  } else {
    // A device space: Kokkos copies with the runtime's pointer-kind inference (host or device on
    // either side), which needs disjoint ranges, so an overlap goes through a temporary.
    using Bytes = Kokkos::View<std::uint8_t*, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
    Bytes to(static_cast<std::uint8_t*>(dst), bytes);
    Bytes from(static_cast<std::uint8_t*>(const_cast<void*>(src)), bytes);
    const auto d = reinterpret_cast<std::uintptr_t>(dst), s = reinterpret_cast<std::uintptr_t>(src);
    if (d < s + bytes && s < d + bytes) {
      Kokkos::View<std::uint8_t*, MemSpace> tmp(Kokkos::view_alloc(Kokkos::WithoutInitializing, "buffer_copy_overlap"),
                                                bytes);
      Kokkos::deep_copy(tmp, from);
      Kokkos::deep_copy(to, tmp);
    } else {
      Kokkos::deep_copy(to, from);
    }
  }
}

}  // namespace shardft
