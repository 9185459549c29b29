#include "server/core/key_list_cache.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace ps {
namespace {

std::vector<uint64_t> Keys(uint64_t first, size_t n) {
  std::vector<uint64_t> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = first + i;
  return keys;
}

TEST(KeyListCacheTest, KeepsPerWorkerAndCountsHitsAndMisses) {
  KeyListCache cache(1 << 20);
  cache.Put(1, 77, Keys(10, 3));
  KeyListCache::List hit = cache.Get(1, 77);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(*hit, Keys(10, 3));
  EXPECT_EQ(cache.Get(2, 77), nullptr) << "worker 2 must not see worker 1's list";
  EXPECT_EQ(cache.Get(1, 78), nullptr);
  const KeyListCache::Stats stats = cache.stats();
  EXPECT_EQ(stats.lists, 1u);
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 2u);
  EXPECT_EQ(stats.bytes, 3 * 8 + 64u);
}

TEST(KeyListCacheTest, EvictsTheLeastRecentlyUsedPastTheCapacity) {
  // Room for three lists of 100 keys (864 bytes each), not four.
  KeyListCache cache(3 * 864 + 100);
  cache.Put(1, 1, Keys(0, 100));
  cache.Put(1, 2, Keys(100, 100));
  cache.Put(1, 3, Keys(200, 100));
  ASSERT_NE(cache.Get(1, 1), nullptr);  // 1 is now the most recently used
  cache.Put(1, 4, Keys(300, 100));      // evicts 2
  EXPECT_NE(cache.Get(1, 1), nullptr);
  EXPECT_EQ(cache.Get(1, 2), nullptr);
  EXPECT_NE(cache.Get(1, 3), nullptr);
  EXPECT_NE(cache.Get(1, 4), nullptr);
  EXPECT_LE(cache.stats().bytes, 3 * 864 + 100u);
  // A list held by a request stays valid after its eviction.
  KeyListCache::List held = cache.Get(1, 3);
  cache.Put(1, 5, Keys(400, 100));
  cache.Put(1, 6, Keys(500, 100));
  cache.Put(1, 7, Keys(600, 100));
  EXPECT_EQ(cache.Get(1, 3), nullptr);
  EXPECT_EQ((*held)[0], 200u);
}

TEST(KeyListCacheTest, ListsOverTheCapacityAndZeroCapacityKeepNothing) {
  KeyListCache small(500);
  small.Put(1, 1, Keys(0, 100));
  EXPECT_EQ(small.Get(1, 1), nullptr);
  EXPECT_EQ(small.stats().bytes, 0u);
  KeyListCache off(0);
  off.Put(1, 1, Keys(0, 1));
  EXPECT_EQ(off.Get(1, 1), nullptr);
}

// Two shards' caches share the process's key-list bytes: a cache drops
// its own oldest lists to make room, never another's, and keeps nothing
// when the others fill the process's share; destroyed, it gives back all.
TEST(KeyListCacheTest, CachesOfOneProcessShareItsBytes) {
  const std::vector<uint64_t> keys(8, 1);  // 8 * 8 + 64 = 128 bytes a list
  MemoryBudget process(256);
  auto a = std::make_unique<KeyListCache>(1024, &process);
  KeyListCache b(1024, &process);
  a->Put(0, 1, keys);
  a->Put(0, 2, keys);
  EXPECT_EQ(process.used(), 256u);
  b.Put(0, 3, keys);
  EXPECT_EQ(b.Get(0, 3), nullptr) << "a holds the process's share";
  a->Put(0, 4, keys);  // a drops its oldest (1) for it
  EXPECT_EQ(a->Get(0, 1), nullptr);
  EXPECT_NE(a->Get(0, 4), nullptr);
  EXPECT_EQ(process.used(), 256u);
  a.reset();
  EXPECT_EQ(process.used(), 0u);
  b.Put(0, 3, keys);
  EXPECT_NE(b.Get(0, 3), nullptr);
  EXPECT_EQ(process.used(), 128u);
}

}  // namespace
}  // namespace ps
