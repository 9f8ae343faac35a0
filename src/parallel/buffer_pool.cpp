#include "parallel/buffer_pool.hpp"

namespace shardft {

template <class T>
View1<T> BufferPool::take_from(std::multimap<std::int64_t, View1<T>>& free, std::int64_t& held, std::int64_t n,
                               const std::string& label) {
  ++takes_;
  const auto it = free.find(n);
  if (it == free.end()) {
    ++allocations_;
    return View1<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), n);
  }
  View1<T> v = it->second;
  free.erase(it);
  held -= n;
  return v;
}

template <class T>
void BufferPool::give_to(std::multimap<std::int64_t, View1<T>>& free, std::int64_t& held, View1<T>& v) {
  if (v.extent(0) > 0 && v.use_count() == 1) {
    held += static_cast<std::int64_t>(v.extent(0));
    free.emplace(static_cast<std::int64_t>(v.extent(0)), v);
  } else if (v.extent(0) > 0) {
    ++drops_;
  }
  v = View1<T>();
}

View1<float> BufferPool::take(std::int64_t n, const std::string& label) { return take_from(free_, held_, n, label); }
void BufferPool::give(View1<float>& v) { give_to(free_, held_, v); }
View1<bf16> BufferPool::take_bf16(std::int64_t n, const std::string& label) {
  return take_from(free_bf16_, held_bf16_, n, label);
}
void BufferPool::give(View1<bf16>& v) { give_to(free_bf16_, held_bf16_, v); }

}  // namespace shardft
