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

// A replay's inserts (BeginBulk) grow the indexes by half, fewer moves;
// EndBulk fits them back within the bytes a row inserts one at a time take
// (slots at most 0.9 and at least 0.76 full: 13.3 to 15.8 bytes a row).
TEST(LogSliceIndexesTest, ABulkLoadIsFittedToItsRows) {
  LogSliceIndexes bulk;
  bulk.BeginBulk();
  // Slices of 3,000 to 24,000 keys: some left under 0.76 full by the growth.
  std::vector<std::vector<uint64_t>> keys;
  for (uint32_t slice = 0; slice < 8; ++slice) {
    keys.push_back(KeysOfSlice(slice, 8, 3000 * (slice + 1)));
    for (size_t i = 0; i < keys[slice].size(); ++i) {
      ASSERT_EQ(bulk.Put(slice, keys[slice][i], static_cast<uint32_t>(i)), LogSliceIndexes::kNone);
    }
  }
  const uint64_t grown = bulk.bytes();
  bulk.EndBulk();
  EXPECT_LT(bulk.bytes(), grown);
  EXPECT_EQ(bulk.rows(), 3000u * 36);
  EXPECT_LT(static_cast<double>(bulk.bytes()) / static_cast<double>(bulk.rows()), 16.0);
  for (uint32_t slice = 0; slice < 8; ++slice) {
    for (size_t i = 0; i < keys[slice].size(); ++i) {
      ASSERT_EQ(bulk.Find(slice, keys[slice][i]), static_cast<uint32_t>(i)) << "slice " << slice;
    }
  }
  // Inserts after it grow by an eighth again: a fitted index stays so.
  const std::vector<uint64_t> more = KeysOfSlice(0, 8, 3100);
  for (size_t i = 3000; i < more.size(); ++i) bulk.Put(0, more[i], 1);
  EXPECT_LT(static_cast<double>(bulk.bytes()) / static_cast<double>(bulk.rows()), 16.0);
}

}  // namespace
}  // namespace ps
