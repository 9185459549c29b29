#include "common/hash_ring.h"

#include <random>
#include <vector>

#include "common/hash.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

constexpr int kKeys = 1000000;

std::vector<uint64_t> RandomKeys() {
  std::mt19937_64 rng(42);
  std::vector<uint64_t> keys(kKeys);
  for (auto& k : keys) k = rng();
  return keys;
}

TEST(HashRingTest, ThreeServersAreBalanced) {
  HashRing ring(3);
  std::vector<int> owned(3, 0);
  for (uint64_t k : RandomKeys()) owned[ring.Owner(Mix64(k))]++;
  const double fair = kKeys / 3.0;
  for (int m = 0; m < 3; ++m) {
    EXPECT_LE(owned[m], 1.15 * fair) << "server " << m << " owns " << owned[m];
    EXPECT_GT(owned[m], 0.85 * fair) << "server " << m << " owns " << owned[m];
  }
}

TEST(HashRingTest, AddingAFourthServerMovesAQuarterOnlyToIt) {
  HashRing three(3), four(4);
  int moved = 0;
  for (uint64_t k : RandomKeys()) {
    const uint64_t h = Mix64(k);
    const int before = three.Owner(h), after = four.Owner(h);
    if (before != after) {
      ++moved;
      ASSERT_EQ(after, 3) << "key " << k << " moved from " << before << " to " << after;
    }
  }
  EXPECT_GT(moved, 0.20 * kKeys);
  EXPECT_LT(moved, 0.30 * kKeys);
}

TEST(HashRingTest, SingleMemberOwnsEverything) {
  HashRing ring(1, 4);
  for (uint64_t k : RandomKeys()) ASSERT_EQ(ring.Owner(k), 0);
}

TEST(HashRingTest, OwnershipIsDeterministicAcrossInstances) {
  HashRing a(5), b(5);
  for (uint64_t k = 0; k < 10000; ++k) ASSERT_EQ(a.Owner(Mix64(k)), b.Owner(Mix64(k)));
}

}  // namespace
}  // namespace ps
