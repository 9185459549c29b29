#include "worker/train/synthetic_data.h"

#include <vector>

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(SyntheticDataTest, ShapesAndBalance) {
  const int kClasses = 10;
  Dataset d = MakeLinearlySeparable(5000, 50, kClasses, /*seed=*/7);
  EXPECT_EQ(d.num_examples, 5000);
  EXPECT_EQ(d.dim, 50);
  EXPECT_EQ(d.num_classes, kClasses);
  ASSERT_EQ(d.features.size(), 5000u * 50u);
  ASSERT_EQ(d.labels.size(), 5000u);
  std::vector<int> per_class(kClasses, 0);
  for (int32_t label : d.labels) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, kClasses);
    ++per_class[label];
  }
  // Balanced-ish: every class within a factor of two of uniform (500).
  for (int c = 0; c < kClasses; ++c) {
    EXPECT_GT(per_class[c], 250) << "class " << c;
    EXPECT_LT(per_class[c], 1000) << "class " << c;
  }
}

TEST(SyntheticDataTest, EveryClassPresentInLowDimensions) {
  Dataset d = MakeLinearlySeparable(300, 2, 3, /*seed=*/1);
  std::vector<int> per_class(3, 0);
  for (int32_t label : d.labels) ++per_class[label];
  for (int c = 0; c < 3; ++c) EXPECT_GT(per_class[c], 0) << "class " << c;
}

TEST(SyntheticDataTest, GeneratingWeightsClassifyAllWithMargin) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    LinearProblem p = MakeLinearProblem(2000, 20, 5, seed);
    const Dataset& d = p.data;
    for (int64_t i = 0; i < d.num_examples; ++i) {
      std::vector<float> scores(d.num_classes);
      for (int k = 0; k < d.num_classes; ++k) {
        for (int j = 0; j < d.dim; ++j) {
          scores[k] += p.weights[k * d.dim + j] * d.row(i)[j];
        }
      }
      for (int k = 0; k < d.num_classes; ++k) {
        if (k == d.labels[i]) continue;
        ASSERT_GE(scores[d.labels[i]] - scores[k], p.margin * 0.999f)
            << "seed " << seed << " example " << i << " class " << k;
      }
    }
  }
}

TEST(SyntheticDataTest, DeterministicForSeed) {
  Dataset a = MakeLinearlySeparable(100, 8, 4, 42);
  Dataset b = MakeLinearlySeparable(100, 8, 4, 42);
  Dataset c = MakeLinearlySeparable(100, 8, 4, 43);
  EXPECT_EQ(a.features, b.features);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.features, c.features);
}

TEST(SyntheticDataTest, QuadrantImagesBrightenTheLabelsQuadrant) {
  const Dataset d = MakeQuadrantImages(200, 8, 6, /*seed=*/3);
  EXPECT_EQ(d.num_examples, 200);
  EXPECT_EQ(d.dim, 48);
  EXPECT_EQ(d.num_classes, 4);
  ASSERT_EQ(d.features.size(), 200u * 48u);
  std::vector<int> per_class(4, 0);
  for (int64_t i = 0; i < d.num_examples; ++i) {
    const int label = d.labels[i];
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 4);
    ++per_class[label];
    for (int r = 0; r < 8; ++r) {
      for (int c = 0; c < 6; ++c) {
        const float v = d.row(i)[r * 6 + c];
        const int quadrant = (r < 4 ? 0 : 2) + (c < 3 ? 0 : 1);
        if (quadrant == label) {
          EXPECT_GT(v, 159.5f / 255) << "example " << i;
        } else {
          EXPECT_LT(v, 96.5f / 255) << "example " << i;
        }
        // Exactly what the IDX reader makes of the byte.
        EXPECT_EQ(v, static_cast<float>(static_cast<int>(v * 255 + 0.5f)) * (1.0f / 255.0f));
      }
    }
  }
  for (int c = 0; c < 4; ++c) EXPECT_GT(per_class[c], 20) << "class " << c;
  EXPECT_EQ(MakeQuadrantImages(50, 8, 8, 9).features, MakeQuadrantImages(50, 8, 8, 9).features);
}

}  // namespace
}  // namespace ps
