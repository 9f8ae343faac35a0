#include "comm/comm_buffers.hpp"

#include <map>
#include <string>

namespace shardft {

namespace {

struct Pool {
  std::multimap<std::size_t, View1<std::uint8_t>> free;
  std::size_t held = 0;
  std::int64_t allocated = 0;
  bool hooked = false, finalized = false;
};

Pool& pool() {
  static Pool p;
  return p;
}

View1<std::uint8_t> take(std::size_t bytes, const char* label) {
  Pool& p = pool();
  if (!p.hooked) {
    // A view must not outlive Kokkos.
    Kokkos::push_finalize_hook([] {
      pool().free.clear();
      pool().held = 0;
      pool().finalized = true;
    });
    p.hooked = true;
  }
  const auto it = p.free.find(bytes);
  if (it == p.free.end()) {
    ++p.allocated;
    return View1<std::uint8_t>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), bytes);
  }
  View1<std::uint8_t> v = it->second;
  p.free.erase(it);
  p.held -= bytes;
  return v;
}

void give(View1<std::uint8_t>& v) {
  Pool& p = pool();
  // Only the borrower references it (CommBuffer cannot be copied), so nobody else can be using it.
  if (!p.finalized && v.extent(0) > 0) {
    p.held += v.extent(0);
    p.free.emplace(v.extent(0), v);
  }
  v = View1<std::uint8_t>();
}

}  // namespace

CommBuffer::CommBuffer(std::size_t bytes, const char* label) {
  if (bytes > 0) view_ = take(bytes, label);
}

// Kokkos 3.4 copies a view on move: the moved-from buffer drops its reference explicitly, so that
// exactly one owner gives it back.
CommBuffer::CommBuffer(CommBuffer&& other) noexcept : view_(other.view_) { other.view_ = View1<std::uint8_t>(); }

CommBuffer& CommBuffer::operator=(CommBuffer&& other) noexcept {
  if (this != &other) {
    release();
    view_ = other.view_;
    other.view_ = View1<std::uint8_t>();
  }
  return *this;
}

void CommBuffer::release() {
  if (view_.extent(0) > 0) give(view_);
}

std::size_t comm_buffers_held_bytes() { return pool().held; }
std::int64_t comm_buffers_allocated() { return pool().allocated; }

}  // namespace shardft
