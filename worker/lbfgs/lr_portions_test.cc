#include "worker/lbfgs/lr_portions.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace ps::lbfgs {
namespace {

// Three examples over features 1, 4 and 7 (hand-made).
LrData ThreeExamples() {
  LrData data;
  data.Add(1, {4, 1}, {2.0f, 1.0f});
  data.Add(0, {7}, {-1.0f});
  data.Add(1, {1, 7}, {0.5f, 3.0f});
  return data;
}

TEST(LrPortionsTest, PlansKeysSortedAndDistinctWithPositions) {
  const LrData data = ThreeExamples();
  const PortionPlan plan = *PlanPortion(data, 0, 3);
  EXPECT_EQ(plan.keys, (std::vector<uint64_t>{1, 4, 7}));
  EXPECT_EQ(plan.positions, (std::vector<uint32_t>{1, 0, 2, 0, 2}));
  const PortionPlan tail = *PlanPortion(data, 1, 3);
  EXPECT_EQ(tail.keys, (std::vector<uint64_t>{1, 7}));
  EXPECT_EQ(tail.positions, (std::vector<uint32_t>{1, 0, 1}));
  EXPECT_EQ(data.max_index, 7u);
}

TEST(LrPortionsTest, LossAndGradientMatchHandComputedValues) {
  const LrData data = ThreeExamples();
  const PortionPlan plan = *PlanPortion(data, 0, 3);
  const std::vector<float> w = {0.5f, -0.25f, 0.125f};  // w1, w4, w7 (exact in float)
  const PortionResult r = LogisticPortion(data, plan, w);
  // z = w.x: e0 = 2*(-0.25) + 0.5 = 0, e1 = -0.125, e2 = 0.25 + 0.375 = 0.625.
  const double z0 = 0.0, z1 = -0.125, z2 = 0.625;
  // Labels +1, -1, +1: loss log(1 + exp(-y z)).
  const double loss =
      std::log1p(std::exp(-z0)) + std::log1p(std::exp(z1)) + std::log1p(std::exp(-z2));
  EXPECT_NEAR(r.loss, loss, 1e-12);
  // dloss/dz = -y sigmoid(-y z).
  auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  const double d0 = -sig(-z0), d1 = sig(z1), d2 = -sig(-z2);
  ASSERT_EQ(r.gradient.size(), 3u);
  EXPECT_NEAR(r.gradient[0], d0 * 1.0 + d2 * 0.5, 1e-6);   // feature 1
  EXPECT_NEAR(r.gradient[1], d0 * 2.0, 1e-6);              // feature 4
  EXPECT_NEAR(r.gradient[2], d1 * -1.0 + d2 * 3.0, 1e-6);  // feature 7
}

TEST(LrPortionsTest, ABiasKeyAddsAConstantFeature) {
  const LrData data = ThreeExamples();
  const uint64_t bias_key = 5;  // between the features' keys
  const absl::StatusOr<PortionPlan> plan = PlanPortion(data, 0, 3, &bias_key);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->keys, (std::vector<uint64_t>{1, 4, 5, 7}));
  EXPECT_EQ(plan->bias, 2);
  EXPECT_EQ(plan->positions, (std::vector<uint32_t>{1, 0, 3, 0, 3}));
  const std::vector<float> w = {0.5f, -0.25f, 0.25f, 0.125f};  // w1, w4, bias, w7
  const PortionResult r = LogisticPortion(data, *plan, w);
  const double z0 = 0.25, z1 = 0.125, z2 = 0.875;  // as without bias, + 0.25
  EXPECT_NEAR(r.loss,
              std::log1p(std::exp(-z0)) + std::log1p(std::exp(z1)) + std::log1p(std::exp(-z2)),
              1e-12);
  auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  EXPECT_NEAR(r.gradient[2], -sig(-z0) + sig(z1) - sig(-z2), 1e-6);  // the bias: sum of dz
  const uint64_t taken = 7;
  const absl::StatusOr<PortionPlan> clash = PlanPortion(data, 0, 3, &taken);
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(clash.status().message().find("has feature 7, the bias key"), std::string::npos);
}

TEST(LrPortionsTest, LargeMarginsDoNotOverflow) {
  LrData data;
  data.Add(1, {0}, {1.0f});
  data.Add(0, {0}, {1.0f});
  const PortionPlan plan = *PlanPortion(data, 0, 2);
  const std::vector<float> w = {1000.0f};
  const PortionResult r = LogisticPortion(data, plan, w);
  // Example 0: log(1 + e^-1000) ~ 0; example 1: log(1 + e^1000) ~ 1000.
  EXPECT_NEAR(r.loss, 1000.0, 1e-9);
  EXPECT_TRUE(std::isfinite(r.gradient[0]));
  EXPECT_NEAR(r.gradient[0], 1.0, 1e-6);
}

TEST(LrPortionsTest, PortionsCoverTheDataOnce) {
  for (size_t n : {1u, 7u, 100u}) {
    for (size_t p : {1u, 3u, 7u}) {
      if (p > n) continue;
      EXPECT_EQ(PortionBegin(n, p, 0), 0u);
      EXPECT_EQ(PortionBegin(n, p, p), n);
      for (size_t i = 0; i < p; ++i) EXPECT_LT(PortionBegin(n, p, i), PortionBegin(n, p, i + 1));
    }
  }
}

TEST(LrPortionsTest, LoadsLibsvmAndNamesAnEmptyFile) {
  const std::string path = std::string(testing::TempDir()) + "/lr.libsvm";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("+1 3:0.5 9:1\n-1 2:2\n", f);
  std::fclose(f);
  absl::StatusOr<LrData> data = LoadLrData(path);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->size(), 2u);
  EXPECT_EQ(data->labels, (std::vector<float>{1, 0}));
  EXPECT_EQ(data->offsets, (std::vector<uint64_t>{0, 2, 3}));
  EXPECT_EQ(data->max_index, 9u);
  const std::string empty = std::string(testing::TempDir()) + "/empty.libsvm";
  std::fclose(std::fopen(empty.c_str(), "w"));
  absl::StatusOr<LrData> none = LoadLrData(empty);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find(empty), std::string::npos);
}

}  // namespace
}  // namespace ps::lbfgs
