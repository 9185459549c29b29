#include "common/placement.h"

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(PlacementTest, SplitRangeCoversRangeAndMatchesOwners) {
  Placement p(3, {/*slice_size=*/16, /*virtual_nodes=*/64});
  const auto parts = p.SplitRange("w", 5, 300);
  ASSERT_FALSE(parts.empty());
  EXPECT_EQ(parts.front().begin, 5u);
  EXPECT_EQ(parts.back().end, 300u);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) {
      EXPECT_EQ(parts[i].begin, parts[i - 1].end);
      EXPECT_NE(parts[i].owner, parts[i - 1].owner) << "adjacent parts not merged";
    }
    for (uint64_t k = parts[i].begin; k < parts[i].end; ++k) {
      ASSERT_EQ(p.OwnerOfKey("w", k), parts[i].owner) << "key " << k;
    }
  }
}

TEST(PlacementTest, SlicesSpreadOverAllServers) {
  Placement p(3, {/*slice_size=*/4, /*virtual_nodes=*/512});
  int owned[3] = {0, 0, 0};
  for (uint64_t s = 0; s < 3000; ++s) owned[p.OwnerOfSlice("table", s)]++;
  for (int m = 0; m < 3; ++m) EXPECT_GT(owned[m], 800) << "server " << m;
}

TEST(PlacementTest, TablesArePlacedIndependently) {
  Placement p(4);
  int same = 0;
  for (uint64_t s = 0; s < 1000; ++s) same += p.OwnerOfSlice("a", s) == p.OwnerOfSlice("b", s);
  EXPECT_LT(same, 400);  // about 1/4 expected by chance
}

TEST(PlacementTest, EmptyRangeHasNoParts) {
  Placement p(2);
  EXPECT_TRUE(p.SplitRange("t", 7, 7).empty());
}

}  // namespace
}  // namespace ps
