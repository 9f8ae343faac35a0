// parallel/buffer_pool.hpp: a buffer handed back is the one the next request of its size gets; other
// sizes allocate; a buffer something else still references is never handed out again.
#include <gtest/gtest.h>

#include "parallel/buffer_pool.hpp"

namespace shardft {
namespace {

TEST(BufferPool, ReusesABufferOfTheSameSizeOnly) {
  BufferPool pool;
  View1<float> a = pool.take(1000, "a");
  const float* first = a.data();
  EXPECT_EQ(a.extent(0), 1000u);
  pool.give(a);
  EXPECT_EQ(a.extent(0), 0u);  // the caller's handle is emptied
  EXPECT_EQ(pool.held_elements(), 1000);
  View1<float> other = pool.take(999, "other");  // another size: a new allocation
  EXPECT_NE(other.data(), first);
  EXPECT_EQ(pool.allocations(), 2);
  View1<float> again = pool.take(1000, "again");
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(pool.held_elements(), 0);
  EXPECT_EQ(pool.allocations(), 2);
}

TEST(BufferPool, ABufferStillReferencedIsDroppedNotPooled) {
  BufferPool pool;
  View1<float> a = pool.take(64, "a");
  View1<float> alias = a;  // e.g. a bucket still reducing from it
  pool.give(a);
  EXPECT_EQ(pool.held_elements(), 0);
  View1<float> b = pool.take(64, "b");
  EXPECT_NE(b.data(), alias.data());
  View1<float> empty;
  pool.give(empty);  // ignored
  EXPECT_EQ(pool.held_elements(), 0);
}

TEST(BufferPool, HoldsAsManyBuffersOfASizeAsWereLiveAtOnce) {
  BufferPool pool;
  for (int step = 0; step < 3; ++step) {
    View1<float> x = pool.take(256, "x"), y = pool.take(256, "y"), z = pool.take(512, "z");
    pool.give(x);
    pool.give(y);
    pool.give(z);
  }
  EXPECT_EQ(pool.allocations(), 3);
  EXPECT_EQ(pool.held_elements(), 256 + 256 + 512);
}

}  // namespace
}  // namespace shardft
