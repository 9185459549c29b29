#include "server/optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(OptimizerTest, SgdMatchesHandComputedValues) {
  auto sgd = MakeSgd(0.5f);
  EXPECT_EQ(sgd->state_per_value(), 0);
  std::vector<float> w = {1.0f, -2.0f, 0.0f};
  const std::vector<float> g = {2.0f, 1.0f, -4.0f};
  sgd->Apply(w.data(), nullptr, g.data(), w.size());
  EXPECT_FLOAT_EQ(w[0], 0.0f);   // 1 - 0.5*2
  EXPECT_FLOAT_EQ(w[1], -2.5f);  // -2 - 0.5*1
  EXPECT_FLOAT_EQ(w[2], 2.0f);   // 0 + 0.5*4
}

TEST(OptimizerTest, AdagradMatchesHandComputedValuesOverTwoSteps) {
  auto opt = MakeAdagrad(/*lr=*/0.1f, /*initial_accumulator=*/1.0f, /*epsilon=*/0.0f);
  ASSERT_EQ(opt->state_per_value(), 1);
  std::vector<float> w = {1.0f, 1.0f};
  std::vector<float> acc(2);
  opt->InitState(acc.data(), acc.size());
  EXPECT_EQ(acc, (std::vector<float>{1.0f, 1.0f}));

  const std::vector<float> g1 = {3.0f, 0.0f};
  opt->Apply(w.data(), acc.data(), g1.data(), 2);
  // acc = 1 + 9 = 10; w = 1 - 0.1 * 3 / sqrt(10)
  EXPECT_FLOAT_EQ(acc[0], 10.0f);
  EXPECT_FLOAT_EQ(w[0], 1.0f - 0.3f / std::sqrt(10.0f));
  EXPECT_FLOAT_EQ(acc[1], 1.0f);
  EXPECT_FLOAT_EQ(w[1], 1.0f);

  const std::vector<float> g2 = {-1.0f, 2.0f};
  opt->Apply(w.data(), acc.data(), g2.data(), 2);
  // acc0 = 11, w0 += 0.1 / sqrt(11); acc1 = 5, w1 = 1 - 0.2 / sqrt(5)
  EXPECT_FLOAT_EQ(acc[0], 11.0f);
  EXPECT_FLOAT_EQ(w[0], 1.0f - 0.3f / std::sqrt(10.0f) + 0.1f / std::sqrt(11.0f));
  EXPECT_FLOAT_EQ(acc[1], 5.0f);
  EXPECT_FLOAT_EQ(w[1], 1.0f - 0.2f / std::sqrt(5.0f));
}

TEST(OptimizerTest, AdagradEpsilonIsAddedToTheRoot) {
  auto opt = MakeAdagrad(1.0f, 0.0f, 1.0f);
  float w = 0.0f, acc = 0.0f;
  opt->InitState(&acc, 1);
  const float g = 3.0f;
  opt->Apply(&w, &acc, &g, 1);
  EXPECT_FLOAT_EQ(acc, 9.0f);
  EXPECT_FLOAT_EQ(w, -3.0f / (3.0f + 1.0f));
}

TEST(OptimizerTest, LongVectorsMatchScalarLoop) {
  // Exercises the vectorized body and the scalar tail.
  auto opt = MakeAdagrad(0.05f, 0.1f, 1e-6f);
  const size_t n = 1027;
  std::vector<float> w(n), acc(n), g(n);
  for (size_t i = 0; i < n; ++i) {
    w[i] = 0.01f * i;
    g[i] = std::sin(0.1f * i);
  }
  opt->InitState(acc.data(), n);
  std::vector<float> w_ref = w;
  opt->Apply(w.data(), acc.data(), g.data(), n);
  for (size_t i = 0; i < n; ++i) {
    const float a = 0.1f + g[i] * g[i];
    EXPECT_NEAR(w[i], w_ref[i] - 0.05f * g[i] / (std::sqrt(a) + 1e-6f), 1e-6f) << i;
  }
}

TEST(OptimizerTest, ApplyRowsMatchesApplySmallRowByRowWithRepeatsAndReadBack) {
  constexpr uint64_t kFirst = 4096, kRows = 64;
  const std::vector<uint64_t> keys = {4100, 4096, 4159, 4100, 4120, 4101, 4100, 4150, 4099,
                                      4130, 4131, 4132, 4097};
  for (size_t width : {1u, 3u}) {
    for (int rule = 0; rule < 2; ++rule) {
      SCOPED_TRACE(testing::Message() << "width " << width << " rule " << rule);
      auto opt = rule == 0 ? MakeSgd(0.25f) : MakeAdagrad(0.1f, 0.5f, 1e-3f);
      const int spv = opt->state_per_value();
      std::vector<float> w(kRows * width), state(kRows * width * spv);
      for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i);
      if (spv) opt->InitState(state.data(), w.size());
      std::vector<float> g(keys.size() * width);
      for (size_t i = 0; i < g.size(); ++i) g[i] = 0.5f - 0.07f * static_cast<float>(i);
      std::vector<float> w_ref = w, state_ref = state, out_ref(g.size());
      for (size_t r = 0; r < keys.size(); ++r) {
        const size_t at = (keys[r] - kFirst) * width;
        opt->ApplySmall(w_ref.data() + at, spv ? state_ref.data() + at : nullptr,
                        g.data() + r * width, width);
        std::copy_n(w_ref.data() + at, width, out_ref.data() + r * width);
      }
      std::vector<float> out(g.size(), -1.0f);
      opt->ApplyRows(w.data(), spv ? state.data() : nullptr, keys.data(), keys.size(), kFirst,
                     width, g.data(), reinterpret_cast<char*>(out.data()));
      EXPECT_EQ(w, w_ref);
      EXPECT_EQ(state, state_ref);
      EXPECT_EQ(out, out_ref);  // key 4100 reads back each of its three updates
    }
  }
}

TEST(OptimizerTest, MakeOptimizerFromDefinition) {
  proto::TableDef def;
  def.set_name("t");
  def.set_optimizer(proto::OPT_ADAGRAD);
  def.set_learning_rate(0.1f);
  auto opt = MakeOptimizer(def);
  ASSERT_TRUE(opt.ok());
  EXPECT_EQ((*opt)->state_per_value(), 1);
  def.set_optimizer(static_cast<proto::OptimizerKind>(99));
  EXPECT_EQ(MakeOptimizer(def).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
