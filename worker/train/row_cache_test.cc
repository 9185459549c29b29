#include "worker/train/row_cache.h"

#include <vector>

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(RowCacheTest, ARowIsReusedForStalenessClocksAndNeverLater) {
  RowCache cache(2, /*staleness=*/3, /*capacity=*/10);
  const std::vector<float> v = {1.5f, -2.0f};
  cache.Insert(7, /*clock=*/10, v);
  std::vector<float> out(2);
  for (uint64_t clock = 10; clock <= 13; ++clock) {
    ASSERT_TRUE(cache.Lookup(7, clock, out.data())) << clock;
    EXPECT_EQ(out, v);
  }
  EXPECT_FALSE(cache.Lookup(7, 14, out.data()));  // 4 clocks old: too stale
  EXPECT_FALSE(cache.Lookup(8, 10, out.data()));  // never pulled
  EXPECT_EQ(cache.hits(), 4u);
  EXPECT_EQ(cache.misses(), 2u);
  cache.Insert(7, 14, {{3.0f, 4.0f}});  // pulled again: fresh until 17
  ASSERT_TRUE(cache.Lookup(7, 17, out.data()));
  EXPECT_EQ(out, (std::vector<float>{3.0f, 4.0f}));
}

TEST(RowCacheTest, StaysWithinItsCapacityKeepingTheRecentlyPulled) {
  RowCache cache(1, 100, /*capacity=*/50);
  // A hot key pulled every clock among a stream of cold ones.
  for (uint64_t c = 0; c < 1000; ++c) {
    const float value = static_cast<float>(c);
    cache.Insert(1000000 + c, c, {&value, 1});
    cache.Insert(1, c, {&value, 1});
    ASSERT_LE(cache.size(), 50u);
  }
  float out = 0;
  ASSERT_TRUE(cache.Lookup(1, 999, &out));
  EXPECT_EQ(out, 999.0f);
  EXPECT_FALSE(cache.Lookup(1000000, 999, &out));  // pulled long ago, evicted
  EXPECT_TRUE(cache.Lookup(1000000 + 990, 999, &out));
}

TEST(RowCacheTest, ZeroCapacityCachesNothing) {
  RowCache cache(1, 100, 0);
  const float v = 1;
  cache.Insert(3, 0, {&v, 1});
  float out;
  EXPECT_FALSE(cache.Lookup(3, 0, &out));
}

}  // namespace
}  // namespace ps
