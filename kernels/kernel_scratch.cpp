#include "kernels/kernel_scratch.hpp"

#include <map>
#include <string>

namespace shardft::scratch_detail {

namespace {

// Doubles: every buffer is 8-byte aligned whatever it holds.
struct Registry {
  std::map<std::string, View1<double>> device;
  std::map<std::string, Kokkos::View<double*, HostSpace>> host;
  bool hooked = false;
};

Registry& registry() {
  static Registry r;
  return r;
}

template <class V>
void* grow(std::map<std::string, V>& buffers, const char* name, std::size_t bytes, bool zeroed) {
  V& v = buffers[name];
  const std::size_t words = (bytes + sizeof(double) - 1) / sizeof(double);
  if (v.extent(0) < words) {
    v = V();  // the old buffer goes first: the peak holds one of them, not both
    v = zeroed ? V(std::string(name), words)
               : V(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(name)), words);
  }
  return v.data();
}

}  // namespace

void* named_scratch(const char* name, std::size_t bytes, bool host, bool zeroed) {
  Registry& r = registry();
  if (!r.hooked) {
    // A view must not outlive Kokkos.
    Kokkos::push_finalize_hook([] {
      registry().device.clear();
      registry().host.clear();
    });
    r.hooked = true;
  }
  if (bytes == 0) return nullptr;
  return host ? grow(r.host, name, bytes, zeroed) : grow(r.device, name, bytes, zeroed);
}

}  // namespace shardft::scratch_detail

namespace shardft {

void release_kernel_scratch() {
  Kokkos::fence();  // no kernel may still use a buffer
  scratch_detail::registry().device.clear();
  scratch_detail::registry().host.clear();
}

}  // namespace shardft
