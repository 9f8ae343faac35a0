#include "parallel/buffer_pool.hpp"

namespace shardft {

View1<float> BufferPool::take(std::int64_t n, const std::string& label) {
  ++takes_;
  const auto it = free_.find(n);
  if (it == free_.end()) {
    ++allocations_;
    return View1<float>(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), n);
  }
  View1<float> v = it->second;
  free_.erase(it);
  held_ -= n;
  return v;
}

void BufferPool::give(View1<float>& v) {
  if (v.extent(0) > 0 && v.use_count() == 1) {
    held_ += static_cast<std::int64_t>(v.extent(0));
    free_.emplace(static_cast<std::int64_t>(v.extent(0)), v);
  } else if (v.extent(0) > 0) {
    ++drops_;
  }
  v = View1<float>();
}

}  // namespace shardft
