#include "server/store/sparse_rows.h"

#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(SparseRowsTest, InsertFindAndEraseAgreeWithAReferenceMap) {
  SparseRows rows(3);
  std::unordered_map<uint64_t, float> reference;  // key -> its row's first float
  std::mt19937_64 rng(7);
  for (int step = 0; step < 200000; ++step) {
    // A small key space, so inserts hit existing keys and erases find some.
    const uint64_t key = rng() % 5000 * 0x9e3779b97f4a7c15ULL;  // spread over uint64
    const int action = static_cast<int>(rng() % 4);
    if (action < 2) {
      bool created = false;
      float* row = rows.Insert(key, &created);
      ASSERT_EQ(created, reference.count(key) == 0) << "step " << step;
      if (created) {
        row[0] = static_cast<float>(step);
        reference[key] = row[0];
      }
      ASSERT_EQ(row[0], reference[key]);
    } else if (action == 2) {
      ASSERT_EQ(rows.Erase(key), reference.erase(key) == 1) << "step " << step;
    } else {
      float* row = rows.Find(key);
      auto it = reference.find(key);
      ASSERT_EQ(row != nullptr, it != reference.end()) << "step " << step;
      if (row != nullptr) {
        ASSERT_EQ(row[0], it->second);
      }
    }
    ASSERT_EQ(rows.size(), reference.size());
  }
  size_t seen = 0;
  rows.ForEach([&](uint64_t key, const float* row) {
    ++seen;
    ASSERT_EQ(reference.count(key), 1u);
    EXPECT_EQ(row[0], reference[key]);
  });
  EXPECT_EQ(seen, reference.size());
}

TEST(SparseRowsTest, RowsKeepTheirAddressWhileTheMapGrows) {
  SparseRows rows(16);
  std::vector<float*> first;
  bool created = false;
  for (uint64_t k = 0; k < 1000; ++k) {
    first.push_back(rows.Insert(k, &created));
    first.back()[15] = static_cast<float>(k);
  }
  for (uint64_t k = 1000; k < 100000; ++k) rows.Insert(k, &created);
  for (uint64_t k = 0; k < 1000; ++k) {
    ASSERT_EQ(rows.Find(k), first[k]);
    ASSERT_EQ(first[k][15], static_cast<float>(k));
  }
  EXPECT_EQ(rows.Find(100000), nullptr);
}

TEST(SparseRowsTest, ErasedRowsAreReusedAndSamplesAreKeysWithRows) {
  SparseRows rows(4);
  bool created = false;
  for (uint64_t k = 0; k < 1000; ++k) rows.Insert(k, &created);
  const uint64_t bytes = rows.bytes();
  float* freed = rows.Find(10);
  ASSERT_TRUE(rows.Erase(10));
  EXPECT_EQ(rows.Find(10), nullptr);
  EXPECT_EQ(rows.Insert(5000, &created), freed);  // the erased key's row
  EXPECT_TRUE(created);
  EXPECT_LE(rows.bytes(), bytes + 64);  // the free list's few bytes at most
  for (uint64_t r = 0; r < 100; ++r) {
    uint64_t key = 0;
    ASSERT_TRUE(rows.SampleKey(r * 7919, &key));
    EXPECT_NE(rows.Find(key), nullptr);
  }
  SparseRows empty(4);
  uint64_t key = 0;
  EXPECT_FALSE(empty.SampleKey(3, &key));
}

TEST(SparseRowsTest, TagsStartAtZeroOnlyGrowAndAreCloned) {
  SparseRows rows(3);
  bool created = false;
  std::vector<float*> at;
  for (uint64_t k = 0; k < 100; ++k) {
    float* row = rows.Insert(k, &created);
    for (int f = 0; f < 3; ++f) row[f] = -1.0f;  // the row's floats: not the tag
    EXPECT_EQ(rows.tag(row), 0u);
    rows.RaiseTag(row, static_cast<uint32_t>(k + 5));
    rows.RaiseTag(row, 1);  // lower: kept
    at.push_back(row);
  }
  for (uint64_t k = 0; k < 100; ++k) {
    EXPECT_EQ(rows.tag(at[k]), k + 5);
    EXPECT_EQ(at[k][2], -1.0f);
  }
  const std::unique_ptr<SparseRows> copy = rows.Clone();
  rows.set_tag(at[7], 1000);
  EXPECT_EQ(copy->tag(copy->Find(7)), 12u);
  // A row reused for another key starts at 0 again.
  ASSERT_TRUE(rows.Erase(7));
  float* reused = rows.Insert(12345, &created);
  EXPECT_EQ(reused, at[7]);
  EXPECT_EQ(rows.tag(reused), 0u);
}

TEST(SparseRowsTest, BytesPerRowStayCloseToTheRowsFloats) {
  // Width 16 with AdaGrad: 32 floats, 128 bytes of raw data per row.
  for (size_t n : {100000u, 150000u, 229000u}) {  // map 1/2, 3/4 and 7/8 full
    SparseRows rows(32);
    bool created = false;
    for (uint64_t k = 0; k < n; ++k) rows.Insert(k * 7919, &created);
    const double per_row = static_cast<double>(rows.bytes()) / n;
    EXPECT_LE(per_row, 1.25 * 128) << n << " rows";
    EXPECT_GE(per_row, 128.0);
  }
}

TEST(SparseRowsTest, RowsOfGrowingChunksNeitherOverlapNorMove) {
  // 3 floats a row: chunks of 16, 16, 32, ... 2048 rows, then 4096.
  SparseRows rows(3);
  bool created = false;
  std::vector<float*> at;
  for (uint64_t k = 0; k < 20000; ++k) {
    float* row = rows.Insert(k, &created);
    ASSERT_TRUE(created);
    for (int c = 0; c < 3; ++c) row[c] = static_cast<float>(k * 3 + c);
    at.push_back(row);
  }
  for (uint64_t k = 0; k < 20000; ++k) {
    ASSERT_EQ(rows.Find(k), at[k]) << k;
    for (int c = 0; c < 3; ++c) ASSERT_EQ(at[k][c], static_cast<float>(k * 3 + c)) << k;
  }
  // A deep copy keeps every row.
  std::unique_ptr<SparseRows> copy = rows.Clone();
  for (uint64_t k = 0; k < 20000; k += 7) {
    const float* row = copy->Find(k);
    ASSERT_NE(row, nullptr);
    ASSERT_EQ(row[2], static_cast<float>(k * 3 + 2)) << k;
  }
}

TEST(SparseRowsTest, ASliceOfAFewRowsTakesAFewHundredBytes) {
  SparseRows rows(2);  // width 1 with SGD
  bool created = false;
  for (uint64_t k = 0; k < 10; ++k) rows.Insert(k, &created);
  // 16 map slots of 12 bytes and a first chunk of 16 rows of 12 bytes
  // (2 floats and the tag).
  EXPECT_EQ(rows.bytes(), 16u * 12 + 16u * 12);
}

TEST(SparseRowsTest, BytesToInsertCoversWhatInsertsAllocate) {
  SparseRows rows(5);
  bool created = false;
  std::mt19937_64 rng(3);
  for (int round = 0; round < 50; ++round) {
    const size_t n = rng() % 3000;
    const uint64_t before = rows.bytes();
    const uint64_t bound = rows.BytesToInsert(n);
    for (size_t i = 0; i < n; ++i) rows.Insert(rng(), &created);
    EXPECT_LE(rows.bytes() - before, bound + 64 * sizeof(void*)) << "round " << round;
  }
}

}  // namespace
}  // namespace ps
