// LogRowIndex: finds, replaces and erases places, and keeps its probes short
// for the keys of one sparse slice (keys that share the high bits of
// Mix64, which chose their slice).
#include "server/store/log_row_index.h"

#include <cstdint>
#include <vector>

#include "common/placement.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

// n keys that all lie in slice `slice` of a table of `buckets` buckets.
std::vector<uint64_t> KeysOfSlice(uint64_t slice, uint64_t buckets, size_t n) {
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; keys.size() < n; ++k) {
    if (Placement::SparseSliceOf(k, buckets) == slice) keys.push_back(k);
  }
  return keys;
}

TEST(LogRowIndexTest, FindsReplacesAndErases) {
  LogRowIndex index;
  const std::vector<uint64_t> keys = KeysOfSlice(3, 16, 1000);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(index.Insert(keys[i], static_cast<uint32_t>(i)), LogRowIndex::kNone);
  }
  EXPECT_EQ(index.size(), keys.size());
  EXPECT_EQ(index.Insert(keys[7], 5000), 7u);  // replaced: the old place back
  EXPECT_EQ(index.Find(keys[7]), 5000u);
  for (size_t i = 0; i < keys.size(); i += 2) EXPECT_NE(index.Erase(keys[i]), LogRowIndex::kNone);
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint32_t want = i % 2 == 0 ? LogRowIndex::kNone : i == 7 ? 5000u : i;
    EXPECT_EQ(index.Find(keys[i]), want) << "key " << keys[i];
  }
  EXPECT_EQ(index.size(), keys.size() / 2);
}

// With the home slot taken from Mix64's high bits, the 20,000 keys of one
// slice of 1024 buckets had ~2 home slots: one cluster, probes ~n long.
TEST(LogRowIndexTest, TheKeysOfOneSliceSpreadOverTheSlots) {
  LogRowIndex index;
  const std::vector<uint64_t> keys = KeysOfSlice(517, 1024, 20000);
  for (size_t i = 0; i < keys.size(); ++i) index.Insert(keys[i], static_cast<uint32_t>(i));
  EXPECT_LE(index.MaxDisplacement(), 64u);
}

}  // namespace
}  // namespace ps
