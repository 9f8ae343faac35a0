#include "comm/collective_error.hpp"

#include <vector>

namespace shardft {

std::string broadcast_text(Communicator& world, const std::string& text, int root) {
  std::int64_t n = static_cast<std::int64_t>(text.size());
  world.broadcast(&n, 1, DType::i64, root);
  std::string out = world.rank() == root ? text : std::string(static_cast<std::size_t>(n), '\0');
  if (n > 0) world.broadcast(out.data(), static_cast<std::size_t>(n), DType::u8, root);
  return out;
}

std::string first_error(Communicator& world, const std::string& mine) {
  int failed = mine.empty() ? 0 : 1;
  std::vector<int> all(static_cast<std::size_t>(world.size()));
  world.all_gather(&failed, all.data(), 1, DType::i32);
  for (int r = 0; r < world.size(); ++r) {
    if (!all[static_cast<std::size_t>(r)]) continue;
    const std::string text = broadcast_text(world, mine, r);
    return world.size() > 1 ? "rank " + std::to_string(r) + ": " + text : text;
  }
  return "";
}

}  // namespace shardft
