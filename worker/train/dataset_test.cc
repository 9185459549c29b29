#include "worker/train/dataset.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace ps {
namespace {

// Example i has features {i, 10 i} and label i % 3.
Dataset Numbered(int64_t n) {
  Dataset d;
  d.num_examples = n;
  d.dim = 2;
  d.num_classes = 3;
  for (int64_t i = 0; i < n; ++i) {
    d.features.push_back(static_cast<float>(i));
    d.features.push_back(static_cast<float>(10 * i));
    d.labels.push_back(static_cast<int32_t>(i % 3));
  }
  return d;
}

TEST(DatasetTest, RowPointsAtExample) {
  Dataset d = Numbered(5);
  EXPECT_EQ(d.row(3)[0], 3.0f);
  EXPECT_EQ(d.row(3)[1], 30.0f);
}

TEST(DatasetTest, ShardsPartitionInOrder) {
  Dataset d = Numbered(10);
  int64_t total = 0;
  for (int index = 0; index < 3; ++index) {
    Dataset s = ShardOf(d, index, 3);
    EXPECT_EQ(s.dim, 2);
    EXPECT_EQ(s.num_classes, 3);
    ASSERT_EQ(s.labels.size(), static_cast<size_t>(s.num_examples));
    ASSERT_EQ(s.features.size(), static_cast<size_t>(s.num_examples * 2));
    for (int64_t j = 0; j < s.num_examples; ++j) {
      const int64_t original = index + 3 * j;
      EXPECT_EQ(s.row(j)[0], static_cast<float>(original));
      EXPECT_EQ(s.row(j)[1], static_cast<float>(10 * original));
      EXPECT_EQ(s.labels[j], original % 3);
    }
    total += s.num_examples;
  }
  EXPECT_EQ(total, 10);
  EXPECT_EQ(ShardOf(d, 0, 3).num_examples, 4);
  EXPECT_EQ(ShardOf(d, 2, 3).num_examples, 3);
}

TEST(DatasetTest, MoreShardsThanExamples) {
  Dataset d = Numbered(2);
  EXPECT_EQ(ShardOf(d, 1, 4).num_examples, 1);
  EXPECT_EQ(ShardOf(d, 3, 4).num_examples, 0);
}

TEST(DatasetTest, HeadTakesPrefix) {
  Dataset d = Numbered(6);
  Dataset h = Head(d, 4);
  EXPECT_EQ(h.num_examples, 4);
  EXPECT_EQ(h.features.size(), 8u);
  EXPECT_EQ(h.row(3)[1], 30.0f);
  EXPECT_EQ(h.labels.back(), 0);
  EXPECT_EQ(Head(d, 100).num_examples, 6);
  EXPECT_EQ(Head(d, 0).num_examples, 0);
  EXPECT_TRUE(Head(d, 0).features.empty());
}

}  // namespace
}  // namespace ps
