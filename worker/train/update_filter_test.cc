#include "worker/train/update_filter.h"

#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(UpdateFilterTest, HoldsSmallUpdatesUntilTheirSumIsSignificant) {
  UpdateFilter filter(1, /*threshold=*/1.0f, /*capacity=*/100);
  std::vector<uint64_t> keys;
  std::vector<float> grads;
  filter.Add({{5, 6}}, {{0.4f, 2.0f}}, &keys, &grads);
  EXPECT_EQ(keys, (std::vector<uint64_t>{6}));  // 0.4 is held
  EXPECT_EQ(grads, (std::vector<float>{2.0f}));
  keys.clear();
  grads.clear();
  filter.Add(std::vector<uint64_t>{5}, std::vector<float>{0.4f}, &keys, &grads);  // 0.8: still held
  EXPECT_TRUE(keys.empty());
  filter.Add(std::vector<uint64_t>{5}, std::vector<float>{-0.3f}, &keys, &grads);  // 0.5
  // 1.1: pushed whole.
  filter.Add(std::vector<uint64_t>{5}, std::vector<float>{0.6f}, &keys, &grads);
  ASSERT_EQ(keys, (std::vector<uint64_t>{5}));
  EXPECT_FLOAT_EQ(grads[0], 1.1f);
  EXPECT_EQ(filter.held(), 0u);
}

TEST(UpdateFilterTest, NothingIsLostWhateverTheThresholdAndCapacity) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint64_t> key(0, 49);
  std::normal_distribution<float> g(0, 0.3f);
  for (float threshold : {0.0f, 0.5f, 5.0f}) {
    for (size_t capacity : {size_t{3}, size_t{1000}}) {
      UpdateFilter filter(2, threshold, capacity);
      std::map<uint64_t, std::vector<double>> added, pushed;
      std::vector<uint64_t> keys;
      std::vector<float> grads;
      for (int step = 0; step < 200; ++step) {
        std::vector<uint64_t> k = {key(rng), key(rng)};
        std::vector<float> v = {g(rng), g(rng), g(rng), g(rng)};
        for (int i = 0; i < 2; ++i) {
          auto& a = added[k[i]];
          a.resize(2);
          a[0] += v[2 * i];
          a[1] += v[2 * i + 1];
        }
        filter.Add(k, v, &keys, &grads);
        ASSERT_LE(filter.held(), capacity);
      }
      filter.Flush(&keys, &grads);
      EXPECT_EQ(filter.held(), 0u);
      for (size_t i = 0; i < keys.size(); ++i) {
        auto& p = pushed[keys[i]];
        p.resize(2);
        p[0] += grads[2 * i];
        p[1] += grads[2 * i + 1];
      }
      ASSERT_EQ(pushed.size(), added.size());
      for (const auto& [k, a] : added) {
        EXPECT_NEAR(pushed[k][0], a[0], 1e-4) << "key " << k;
        EXPECT_NEAR(pushed[k][1], a[1], 1e-4) << "key " << k;
      }
      if (threshold == 0) {
        EXPECT_EQ(keys.size(), 400u);  // everything, at once
      }
    }
  }
}

}  // namespace
}  // namespace ps
