#include "worker/train/auc.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(AucAccumulatorTest, PerfectRankingIsOne) {
  AucAccumulator auc;
  for (double p : {0.1, 0.2, 0.3}) auc.Add(p, 0);
  for (double p : {0.7, 0.8, 0.9}) auc.Add(p, 1);
  EXPECT_EQ(auc.Auc(), 1.0);
  EXPECT_EQ(auc.count(), 6);
  EXPECT_EQ(auc.positives(), 3);
  EXPECT_EQ(auc.negatives(), 3);
}

TEST(AucAccumulatorTest, ReversedRankingIsZero) {
  AucAccumulator auc;
  for (double p : {0.1, 0.2, 0.3}) auc.Add(p, 1);
  for (double p : {0.7, 0.8, 0.9}) auc.Add(p, 0);
  EXPECT_EQ(auc.Auc(), 0.0);
}

TEST(AucAccumulatorTest, AllTiesIsOneHalf) {
  AucAccumulator auc;
  for (int i = 0; i < 10; ++i) auc.Add(0.25, i % 3 == 0 ? 1 : 0);
  EXPECT_EQ(auc.Auc(), 0.5);
}

TEST(AucAccumulatorTest, HandComputedCase) {
  // Positives 0.9, 0.4; negatives 0.5, 0.1, 0.4. Of the 6 pairs, 0.9 beats
  // all three negatives (3); 0.4 loses to 0.5 (0), beats 0.1 (1) and ties
  // 0.4 (1/2): 4.5 / 6.
  AucAccumulator auc;
  auc.Add(0.9, 1);
  auc.Add(0.4, 1);
  auc.Add(0.5, 0);
  auc.Add(0.1, 0);
  auc.Add(0.4, 0);
  EXPECT_DOUBLE_EQ(auc.Auc(), 0.75);
}

TEST(AucAccumulatorTest, MinusOnePlusOneLabelsAndClamping) {
  AucAccumulator auc;
  auc.Add(-3.0, -1);          // clamped to 0
  auc.Add(std::nan(""), -1);  // counts as 0
  auc.Add(7.0, +1);           // clamped to 1
  EXPECT_EQ(auc.negatives(), 2);
  EXPECT_EQ(auc.positives(), 1);
  EXPECT_EQ(auc.Auc(), 1.0);
}

TEST(AucAccumulatorTest, OneClassIsNan) {
  AucAccumulator auc;
  EXPECT_TRUE(std::isnan(auc.Auc()));
  auc.Add(0.3, 1);
  auc.Add(0.6, 1);
  EXPECT_TRUE(std::isnan(auc.Auc()));
}

TEST(AucAccumulatorTest, MatchesExactPairCountOnRandomScores) {
  // Scores on a 1/1000 grid: with 10^5 bins no two distinct scores share a
  // bin, so the binned AUC equals the exact O(n^2) pair count.
  std::mt19937_64 rng(7);
  std::vector<double> pos, neg;
  AucAccumulator auc;
  for (int i = 0; i < 600; ++i) {
    const bool positive = rng() % 3 == 0;
    // Positives lean high so the AUC is away from 1/2.
    const int grid = static_cast<int>(rng() % 1000);
    const double p = (positive ? std::min(999, grid + 150) : grid) / 1000.0;
    (positive ? pos : neg).push_back(p);
    auc.Add(p, positive ? 1 : 0);
  }
  double wins = 0;
  for (double p : pos) {
    for (double n : neg) wins += p > n ? 1 : p == n ? 0.5 : 0;
  }
  EXPECT_NEAR(auc.Auc(), wins / (pos.size() * neg.size()), 1e-12);
}

TEST(AucAccumulatorTest, MergeAddsCountsAndClearResets) {
  AucAccumulator a, b;
  a.Add(0.9, 1);
  a.Add(0.4, 1);
  a.Add(0.5, 0);
  b.Add(0.1, 0);
  b.Add(0.4, 0);
  a.Merge(b);
  EXPECT_EQ(a.count(), 5);
  EXPECT_DOUBLE_EQ(a.Auc(), 0.75);
  a.Clear();
  EXPECT_EQ(a.count(), 0);
  EXPECT_TRUE(std::isnan(a.Auc()));
}

TEST(AucAccumulatorTest, FewBinsTreatNeighboursAsTies) {
  // With 2 bins, 0.1 and 0.4 share bin 0: the pair counts 1/2.
  AucAccumulator auc(2);
  auc.Add(0.4, 1);
  auc.Add(0.1, 0);
  EXPECT_EQ(auc.Auc(), 0.5);
  auc.Add(0.6, 1);  // bin 1 beats the negative in bin 0
  EXPECT_EQ(auc.Auc(), 0.75);
}

}  // namespace
}  // namespace ps
