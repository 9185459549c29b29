#include "common/optimizer/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <memory>
#include <vector>

#include "common/optimizer/optimizer_test_util.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(OptimizerTest, StatePerValueOfEachRule) {
  const int expected[] = {0, 1, 1, 1, 1, 2, 2};
  for (size_t i = 0; i < std::size(kAllKinds); ++i) {
    EXPECT_EQ(Make(Def(kAllKinds[i], 0.1f))->state_per_value(), expected[i])
        << proto::OptimizerKind_Name(kAllKinds[i]);
  }
}

TEST(OptimizerTest, InitStateWritesTheFloatsItIsGiven) {
  proto::TableDef def = Def(proto::OPT_ADAGRAD, 0.1f);
  def.set_initial_accumulator(0.25f);
  std::vector<float> acc(4, -1.0f);
  Make(def)->InitState(acc.data(), 3);
  EXPECT_EQ(acc, (std::vector<float>{0.25f, 0.25f, 0.25f, -1.0f}));
  // Adam: {m, v} of 3 values are 6 floats; the seventh is not the state's.
  std::vector<float> adam(7, -1.0f);
  Make(Def(proto::OPT_ADAM, 0.1f))->InitState(adam.data(), 6);
  EXPECT_EQ(adam, (std::vector<float>{0, 0, 0, 0, 0, 0, -1.0f}));
}

TEST(OptimizerTest, SgdMatchesHandComputedValuesOverThreeSteps) {
  auto opt = Make(Def(proto::OPT_SGD, 0.5f));
  Params p(*opt, {1.0f, -2.0f, 0.0f});
  p.Step(*opt, {2.0f, 1.0f, -4.0f}, 0);
  EXPECT_EQ(p.w, (std::vector<float>{0.0f, -2.5f, 2.0f}));  // 1 - 0.5*2, -2 - 0.5*1, 0 + 0.5*4
  p.Step(*opt, {-2.0f, 1.0f, 0.0f}, 1);
  EXPECT_EQ(p.w, (std::vector<float>{1.0f, -3.0f, 2.0f}));  // 0 + 1, -2.5 - 0.5, 2 - 0
  p.Step(*opt, {0.5f, -1.0f, 2.0f}, 2);
  EXPECT_EQ(p.w, (std::vector<float>{0.75f, -2.5f, 1.0f}));  // 1 - 0.25, -3 + 0.5, 2 - 1
}

TEST(OptimizerTest, AdagradMatchesHandComputedValuesOverThreeSteps) {
  proto::TableDef def = Def(proto::OPT_ADAGRAD, 0.1f);
  def.set_initial_accumulator(1.0f);
  auto opt = Make(def);
  Params p(*opt, {1.0f, 1.0f});
  EXPECT_EQ(p.state, (std::vector<float>{1.0f, 1.0f}));

  p.Step(*opt, {3.0f, 0.0f}, 0);
  // acc0 = 1 + 9 = 10; w0 = 1 - 0.1 * 3 / sqrt(10); value 1 unchanged.
  EXPECT_FLOAT_EQ(p.state[0], 10.0f);
  EXPECT_FLOAT_EQ(p.w[0], 1.0f - 0.3f / std::sqrt(10.0f));
  EXPECT_FLOAT_EQ(p.state[1], 1.0f);
  EXPECT_FLOAT_EQ(p.w[1], 1.0f);

  p.Step(*opt, {-1.0f, 2.0f}, 1);
  // acc0 = 11, w0 += 0.1 / sqrt(11); acc1 = 5, w1 = 1 - 0.2 / sqrt(5)
  EXPECT_FLOAT_EQ(p.state[0], 11.0f);
  EXPECT_FLOAT_EQ(p.w[0], 1.0f - 0.3f / std::sqrt(10.0f) + 0.1f / std::sqrt(11.0f));
  EXPECT_FLOAT_EQ(p.state[1], 5.0f);
  EXPECT_FLOAT_EQ(p.w[1], 1.0f - 0.2f / std::sqrt(5.0f));

  p.Step(*opt, {1.0f, -2.0f}, 2);
  // acc0 = 12, w0 -= 0.1 / sqrt(12); acc1 = 9, w1 += 0.2 / 3
  EXPECT_FLOAT_EQ(p.state[0], 12.0f);
  EXPECT_FLOAT_EQ(
      p.w[0], 1.0f - 0.3f / std::sqrt(10.0f) + 0.1f / std::sqrt(11.0f) - 0.1f / std::sqrt(12.0f));
  EXPECT_FLOAT_EQ(p.state[1], 9.0f);
  EXPECT_FLOAT_EQ(p.w[1], 1.0f - 0.2f / std::sqrt(5.0f) + 0.2f / 3.0f);
}

TEST(OptimizerTest, AdagradEpsilonIsAddedToTheRoot) {
  proto::TableDef def = Def(proto::OPT_ADAGRAD, 1.0f);
  def.set_epsilon(1.0f);
  auto opt = Make(def);
  Params p(*opt, {0.0f});
  p.Step(*opt, {3.0f}, 0);
  EXPECT_FLOAT_EQ(p.state[0], 9.0f);
  EXPECT_FLOAT_EQ(p.w[0], -3.0f / (3.0f + 1.0f));
}

TEST(OptimizerTest, MomentumMatchesHandComputedValuesOverThreeSteps) {
  proto::TableDef def = Def(proto::OPT_MOMENTUM, 0.1f);
  def.set_momentum(0.9f);
  auto opt = Make(def);
  Params p(*opt, {1.0f});
  EXPECT_EQ(p.state[0], 0.0f);
  p.Step(*opt, {1.0f}, 0);
  // v = 0.9 * 0 + 1 = 1; w = 1 - 0.1 * 1 = 0.9
  EXPECT_FLOAT_EQ(p.state[0], 1.0f);
  EXPECT_FLOAT_EQ(p.w[0], 0.9f);
  p.Step(*opt, {1.0f}, 1);
  // v = 0.9 * 1 + 1 = 1.9; w = 0.9 - 0.19 = 0.71
  EXPECT_FLOAT_EQ(p.state[0], 1.9f);
  EXPECT_FLOAT_EQ(p.w[0], 0.71f);
  p.Step(*opt, {-2.0f}, 2);
  // v = 0.9 * 1.9 - 2 = -0.29; w = 0.71 + 0.029 = 0.739
  EXPECT_FLOAT_EQ(p.state[0], -0.29f);
  EXPECT_FLOAT_EQ(p.w[0], 0.739f);
}

TEST(OptimizerTest, NesterovMatchesHandComputedValuesOverThreeSteps) {
  proto::TableDef def = Def(proto::OPT_NESTEROV, 0.1f);
  def.set_momentum(0.9f);
  auto opt = Make(def);
  Params p(*opt, {1.0f});
  p.Step(*opt, {1.0f}, 0);
  // v = 1; w = 1 - 0.1 * (1 + 0.9 * 1) = 0.81
  EXPECT_FLOAT_EQ(p.state[0], 1.0f);
  EXPECT_FLOAT_EQ(p.w[0], 0.81f);
  p.Step(*opt, {1.0f}, 1);
  // v = 1.9; w = 0.81 - 0.1 * (1 + 0.9 * 1.9) = 0.81 - 0.271 = 0.539
  EXPECT_FLOAT_EQ(p.state[0], 1.9f);
  EXPECT_FLOAT_EQ(p.w[0], 0.539f);
  p.Step(*opt, {-2.0f}, 2);
  // v = -0.29; w = 0.539 - 0.1 * (-2 + 0.9 * -0.29) = 0.539 + 0.2261 = 0.7651
  EXPECT_FLOAT_EQ(p.state[0], -0.29f);
  EXPECT_FLOAT_EQ(p.w[0], 0.7651f);
}

TEST(OptimizerTest, RmsPropMatchesHandComputedValuesOverThreeSteps) {
  proto::TableDef def = Def(proto::OPT_RMSPROP, 0.1f);
  def.set_rho(0.5f);
  def.set_epsilon(1.0f);
  auto opt = Make(def);
  Params p(*opt, {1.0f});
  EXPECT_EQ(p.state[0], 0.0f);
  p.Step(*opt, {4.0f}, 0);
  // s = 0.5 * 0 + 0.5 * 16 = 8; w = 1 - 0.1 * 4 / (sqrt(8) + 1)
  float w = 1.0f - 0.4f / (std::sqrt(8.0f) + 1.0f);
  EXPECT_FLOAT_EQ(p.state[0], 8.0f);
  EXPECT_FLOAT_EQ(p.w[0], w);
  p.Step(*opt, {-2.0f}, 1);
  // s = 4 + 0.5 * 4 = 6; w += 0.1 * 2 / (sqrt(6) + 1)
  w += 0.2f / (std::sqrt(6.0f) + 1.0f);
  EXPECT_FLOAT_EQ(p.state[0], 6.0f);
  EXPECT_FLOAT_EQ(p.w[0], w);
  p.Step(*opt, {0.0f}, 2);
  // s = 3; a zero gradient leaves w alone.
  EXPECT_FLOAT_EQ(p.state[0], 3.0f);
  EXPECT_FLOAT_EQ(p.w[0], w);
}

TEST(OptimizerTest, AdamMatchesHandComputedValuesOverThreeSteps) {
  proto::TableDef def = Def(proto::OPT_ADAM, 0.1f);
  def.set_beta1(0.5f);
  def.set_beta2(0.75f);
  def.set_epsilon(0.5f);
  auto opt = Make(def);
  Params p(*opt, {1.0f});
  ASSERT_EQ(p.state.size(), 2u);  // {m, v}

  p.Step(*opt, {2.0f}, 0);
  // n = 1: m = 0.5 * 2 = 1; v = 0.25 * 4 = 1; m_hat = 1 / 0.5 = 2;
  // v_hat = 1 / 0.25 = 4; w = 1 - 0.1 * 2 / (2 + 0.5) = 0.92
  EXPECT_FLOAT_EQ(p.state[0], 1.0f);
  EXPECT_FLOAT_EQ(p.state[1], 1.0f);
  EXPECT_FLOAT_EQ(p.w[0], 0.92f);

  p.Step(*opt, {-2.0f}, 1);
  // n = 2: m = 0.5 - 1 = -0.5; v = 0.75 + 1 = 1.75; m_hat = -0.5 / 0.75 = -2/3;
  // v_hat = 1.75 / 0.4375 = 4; w = 0.92 + 0.1 * (2/3) / 2.5 = 0.92 + 0.08/3
  EXPECT_FLOAT_EQ(p.state[0], -0.5f);
  EXPECT_FLOAT_EQ(p.state[1], 1.75f);
  EXPECT_FLOAT_EQ(p.w[0], 0.92f + 0.08f / 3.0f);

  p.Step(*opt, {0.0f}, 2);
  // n = 3: m = -0.25; v = 1.3125; m_hat = -0.25 / 0.875 = -2/7;
  // v_hat = 1.3125 / (1 - 0.421875) = 1.3125 / 0.578125;
  // w = previous + 0.1 * (2/7) / (sqrt(v_hat) + 0.5)
  EXPECT_FLOAT_EQ(p.state[0], -0.25f);
  EXPECT_FLOAT_EQ(p.state[1], 1.3125f);
  const double v_hat = 1.3125 / 0.578125;
  EXPECT_FLOAT_EQ(p.w[0], 0.92 + 0.08 / 3 + 0.1 * (2.0 / 7) / (std::sqrt(v_hat) + 0.5));
}

TEST(OptimizerTest, AdamBiasCorrectionUsesClockPlusOne) {
  proto::TableDef def = Def(proto::OPT_ADAM, 0.1f);
  def.set_beta1(0.9f);
  def.set_beta2(0.999f);
  def.set_epsilon(1e-12f);
  auto opt = Make(def);
  // Clock 0 is step 1: m_hat = g and v_hat = g^2 exactly, so the first step
  // moves w by lr whatever g (with clock as the step it would divide by 0).
  Params first(*opt, {1.0f, 1.0f});
  first.Step(*opt, {5.0f, -0.01f}, 0);
  EXPECT_FLOAT_EQ(first.w[0], 0.9f);
  EXPECT_FLOAT_EQ(first.w[1], 1.1f);
  // The same fresh state pushed at clock 4 (step 5): m = 0.1 g, v = 0.001 g^2,
  // m_hat = 0.1 g / (1 - 0.9^5), v_hat = 0.001 g^2 / (1 - 0.999^5).
  Params late(*opt, {1.0f});
  late.Step(*opt, {5.0f}, 4);
  const double m_hat = 0.1 * 5 / (1 - std::pow(0.9, 5));
  const double v_hat = 0.001 * 25 / (1 - std::pow(0.999, 5));
  EXPECT_FLOAT_EQ(late.w[0], 1 - 0.1 * m_hat / std::sqrt(v_hat));
}

TEST(OptimizerTest, FtrlMatchesHandComputedValuesOverThreeSteps) {
  proto::TableDef def = Def(proto::OPT_FTRL, 0.5f);  // alpha = 0.5
  def.set_ftrl_beta(1.0f);
  def.set_l1(1.0f);
  def.set_l2(0.5f);
  auto opt = Make(def);
  Params p(*opt, {0.2f});
  ASSERT_EQ(p.state.size(), 2u);  // {z, n}

  p.Step(*opt, {3.0f}, 0);
  // sigma = (sqrt(9) - 0) / 0.5 = 6; z = 3 - 6 * 0.2 = 1.8; n = 9;
  // |z| > 1: w = -(1.8 - 1) / ((1 + 3) / 0.5 + 0.5) = -0.8 / 8.5
  const double w1 = -0.8 / 8.5;
  EXPECT_FLOAT_EQ(p.state[0], 1.8f);
  EXPECT_FLOAT_EQ(p.state[1], 9.0f);
  EXPECT_FLOAT_EQ(p.w[0], w1);

  p.Step(*opt, {-4.0f}, 1);
  // sigma = (5 - 3) / 0.5 = 4; z = 1.8 - 4 - 4 * w1; n = 25;
  // |z| > 1: w = -(z + 1) / ((1 + 5) / 0.5 + 0.5)
  const double z2 = 1.8 - 4 - 4 * w1;
  const double w2 = -(z2 + 1) / 12.5;
  EXPECT_NEAR(p.state[0], z2, 1e-6);
  EXPECT_FLOAT_EQ(p.state[1], 25.0f);
  EXPECT_NEAR(p.w[0], w2, 1e-6);

  p.Step(*opt, {1.5f}, 2);
  // sigma = (sqrt(27.25) - 5) / 0.5; z = z2 + 1.5 - sigma * w2 (about
  // -0.35); n = 27.25; |z| <= 1: w is exactly +0.
  const double z3 = z2 + 1.5 - (std::sqrt(27.25) - 5) / 0.5 * w2;
  EXPECT_NEAR(p.state[0], z3, 1e-6);
  EXPECT_FLOAT_EQ(p.state[1], 27.25f);
  EXPECT_EQ(p.w[0], 0.0f);
  EXPECT_FALSE(std::signbit(p.w[0]));
}

TEST(OptimizerTest, FtrlGivesExactZerosWithinL1InBothPaths) {
  proto::TableDef def = Def(proto::OPT_FTRL, 0.1f);
  def.set_ftrl_beta(1.0f);
  def.set_l1(10.0f);
  auto opt = Make(def);
  // 40 values: the vector path and the scalar tail. |z| stays <= 10.
  std::vector<float> g(40);
  for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.7f * i);
  Params p(*opt, std::vector<float>(40, 0.3f));
  for (uint64_t clock = 0; clock < 3; ++clock) p.Step(*opt, g, clock);
  for (size_t i = 0; i < p.w.size(); ++i) {
    EXPECT_EQ(p.w[i], 0.0f) << i;
    EXPECT_FALSE(std::signbit(p.w[i])) << i;
  }
  // A value whose |z| passes l1 is not zero.
  Params big(*opt, {0.0f});
  big.Step(*opt, {20.0f}, 0);  // z = 20 - (20 / 0.1) * 0 = 20
  EXPECT_FLOAT_EQ(big.w[0], -(20.0f - 10.0f) / ((1.0f + 20.0f) / 0.1f));
}

TEST(OptimizerTest, FtrlStaysFiniteWhenTheScheduleUnderflows) {
  proto::TableDef def = Def(proto::OPT_FTRL, 0.1f);
  def.set_ftrl_beta(1.0f);
  def.set_l1(0.01f);
  def.set_lr_schedule(proto::LR_STEP);
  def.set_lr_gamma(0.5f);
  def.set_lr_step_clocks(1);
  auto opt = Make(def);
  // By clock 200 the rate, 0.1 * 0.5^200, is below the smallest float.
  Params p(*opt, {0.0f, 0.5f});
  for (uint64_t clock : {0u, 1u, 200u, 201u}) p.Step(*opt, {8.0f, 0.0f}, clock);
  for (float v : p.w) EXPECT_TRUE(std::isfinite(v)) << v;
  for (float v : p.state) EXPECT_TRUE(std::isfinite(v)) << v;
}

// The vector path (runs of 16 values and more) against the scalar one (one
// value per call), with and without clipping and weight decay (rows of one
// value, so each value's norm is its row's in both): the same rule, within
// float rounding and Eigen's fast square root.
TEST(OptimizerTest, LongRunsMatchValueByValueForEveryRule) {
  const size_t n = 1027;
  std::vector<float> w0(n), g(n);
  for (size_t i = 0; i < n; ++i) {
    w0[i] = 0.01f * static_cast<float>(i % 50) - 0.2f;
    g[i] = std::sin(0.1f * static_cast<float>(i));
  }
  for (proto::OptimizerKind kind : kAllKinds) {
    for (bool transform : {false, true}) {
      SCOPED_TRACE(testing::Message()
                   << proto::OptimizerKind_Name(kind) << (transform ? " clipped, decayed" : ""));
      proto::TableDef def = FullDef(kind);
      if (transform) {
        def.set_clip_value(0.8f);
        def.set_clip_norm(0.5f);
        def.set_weight_decay(0.01f);
      }
      auto opt = Make(def);
      Params run(*opt, w0), single(*opt, w0);
      const int spv = opt->state_per_value();
      for (uint64_t clock = 0; clock < 3; ++clock) {
        run.Step(*opt, g, clock);
        for (size_t i = 0; i < n; ++i) {
          opt->Apply(&single.w[i], spv ? &single.state[i * spv] : nullptr, &g[i], 1, 1, clock);
        }
      }
      for (size_t i = 0; i < n; ++i) {
        ASSERT_NEAR(run.w[i], single.w[i], 1e-5f * (1 + std::abs(single.w[i]))) << i;
      }
      for (size_t i = 0; i < run.state.size(); ++i) {
        ASSERT_NEAR(run.state[i], single.state[i], 1e-5f * (1 + std::abs(single.state[i]))) << i;
      }
    }
  }
}

TEST(OptimizerTest, ClipsEachValueThenEachRowsNorm) {
  proto::TableDef def = Def(proto::OPT_SGD, 1.0f);
  def.set_clip_value(1.0f);
  auto by_value = Make(def);
  Params p(*by_value, {0.0f, 0.0f, 0.0f});
  p.Step(*by_value, {3.0f, -0.5f, -2.0f}, 0);
  EXPECT_EQ(p.w, (std::vector<float>{-1.0f, 0.5f, 1.0f}));  // g clipped to {1, -0.5, -1}

  def.set_clip_value(0.0f);
  def.set_clip_norm(5.0f);
  auto by_norm = Make(def);
  // Width 2: row {6, 8} has norm 10 and becomes {3, 4}; row {0.3, 0.4} (norm
  // 0.5) is left alone.
  Params q(*by_norm, {0.0f, 0.0f, 0.0f, 0.0f});
  q.Step(*by_norm, {6.0f, 8.0f, 0.3f, 0.4f}, 0, /*width=*/2);
  EXPECT_FLOAT_EQ(q.w[0], -3.0f);
  EXPECT_FLOAT_EQ(q.w[1], -4.0f);
  EXPECT_FLOAT_EQ(q.w[2], -0.3f);
  EXPECT_FLOAT_EQ(q.w[3], -0.4f);

  // Both: the value clip comes first. Row {10, 1} is clipped to {2, 1}, norm
  // sqrt(5), then scaled by 2 / sqrt(5). (The other order would give {1.99,
  // 0.199}.)
  def.set_clip_value(2.0f);
  def.set_clip_norm(2.0f);
  auto both = Make(def);
  Params r(*both, {0.0f, 0.0f});
  r.Step(*both, {10.0f, 1.0f}, 0, /*width=*/2);
  EXPECT_FLOAT_EQ(r.w[0], -2.0f * 2.0f / std::sqrt(5.0f));
  EXPECT_FLOAT_EQ(r.w[1], -1.0f * 2.0f / std::sqrt(5.0f));
}

TEST(OptimizerTest, RowNormIsTakenOverTheWholeRowWhenItSpansBlocks) {
  // Rows of 1500 values are longer than the 1024-value transform block.
  proto::TableDef def = Def(proto::OPT_SGD, 1.0f);
  def.set_clip_norm(3.0f);
  auto opt = Make(def);
  const size_t width = 1500;
  std::vector<float> g(2 * width, 1.0f);
  std::fill(g.begin() + width, g.end(), 0.5f);
  Params p(*opt, std::vector<float>(2 * width, 0.0f));
  p.Step(*opt, g, 0, width);
  // Row 0: norm sqrt(1500), each value 1 * 3 / sqrt(1500). Row 1: norm
  // 0.5 * sqrt(1500), each value 0.5 * 3 / (0.5 * sqrt(1500)): the same.
  const float step = 3.0f / std::sqrt(1500.0f);
  for (size_t i = 0; i < p.w.size(); ++i) ASSERT_NEAR(p.w[i], -step, 1e-6f) << i;
}

TEST(OptimizerTest, WeightDecayAddsToTheGradientAfterClipping) {
  proto::TableDef def = Def(proto::OPT_SGD, 0.5f);
  def.set_weight_decay(0.1f);
  auto opt = Make(def);
  Params p(*opt, {2.0f});
  p.Step(*opt, {1.0f}, 0);
  // g = 1 + 0.1 * 2 = 1.2; w = 2 - 0.6 = 1.4
  EXPECT_FLOAT_EQ(p.w[0], 1.4f);
  p.Step(*opt, {0.0f}, 1);
  // g = 0.14; w = 1.4 - 0.07 = 1.33
  EXPECT_FLOAT_EQ(p.w[0], 1.33f);
  p.Step(*opt, {-1.0f}, 2);
  // g = -1 + 0.133 = -0.867; w = 1.33 + 0.4335 = 1.7635
  EXPECT_FLOAT_EQ(p.w[0], 1.7635f);

  // After clipping: g = 3 clipped to 1, plus 0.5 * 4 = 3; w = 4 - 3 = 1.
  // (Decay first would clip 3 + 2 to 1: w = 3.)
  def.set_learning_rate(1.0f);
  def.set_weight_decay(0.5f);
  def.set_clip_value(1.0f);
  auto clipped = Make(def);
  Params q(*clipped, {4.0f});
  q.Step(*clipped, {3.0f}, 0);
  EXPECT_FLOAT_EQ(q.w[0], 1.0f);
}

// The rate at clock t, read from an SGD step with gradient 1.
float RateAt(const Optimizer& opt, uint64_t t) {
  float w = 0;
  const float g = 1;
  opt.Apply(&w, nullptr, &g, 1, 1, t);
  return -w;
}

TEST(OptimizerTest, ConstantScheduleIgnoresTheClock) {
  auto opt = Make(Def(proto::OPT_SGD, 0.5f));
  for (uint64_t t : {0u, 5u, 100000u}) EXPECT_EQ(RateAt(*opt, t), 0.5f) << t;
}

TEST(OptimizerTest, StepScheduleMultipliesByGammaEveryStepClocks) {
  proto::TableDef def = Def(proto::OPT_SGD, 1.0f);
  def.set_lr_schedule(proto::LR_STEP);
  def.set_lr_gamma(0.5f);
  def.set_lr_step_clocks(3);
  auto opt = Make(def);
  // 1 * 0.5^floor(t / 3)
  const float expected[] = {1, 1, 1, 0.5f, 0.5f, 0.5f, 0.25f, 0.25f};
  for (uint64_t t = 0; t < std::size(expected); ++t) {
    EXPECT_FLOAT_EQ(RateAt(*opt, t), expected[t]) << t;
  }
}

TEST(OptimizerTest, InvSqrtScheduleDividesByTheRootOfOffsetPlusClock) {
  proto::TableDef def = Def(proto::OPT_SGD, 2.0f);
  def.set_lr_schedule(proto::LR_INV_SQRT);
  def.set_lr_decay_offset(4.0f);
  auto opt = Make(def);
  EXPECT_FLOAT_EQ(RateAt(*opt, 0), 1.0f);         // 2 / sqrt(4)
  EXPECT_FLOAT_EQ(RateAt(*opt, 5), 2.0f / 3.0f);  // 2 / sqrt(9)
  EXPECT_FLOAT_EQ(RateAt(*opt, 12), 0.5f);        // 2 / sqrt(16)
}

TEST(OptimizerTest, WarmupRampsAnySchedule) {
  proto::TableDef def = Def(proto::OPT_SGD, 1.0f);
  def.set_warmup_clocks(4);
  auto constant = Make(def);
  // (t + 1) / 4 for t < 4, then 1.
  const float ramp[] = {0.25f, 0.5f, 0.75f, 1.0f, 1.0f};
  for (uint64_t t = 0; t < std::size(ramp); ++t) {
    EXPECT_FLOAT_EQ(RateAt(*constant, t), ramp[t]) << t;
  }
  def.set_lr_schedule(proto::LR_STEP);
  def.set_lr_gamma(0.5f);
  def.set_lr_step_clocks(2);
  auto step = Make(def);
  // 0.5^floor(t / 2) * ramp: 1 * 0.25, 1 * 0.5, 0.5 * 0.75, 0.5 * 1, 0.25.
  const float stepped[] = {0.25f, 0.5f, 0.375f, 0.5f, 0.25f};
  for (uint64_t t = 0; t < std::size(stepped); ++t) {
    EXPECT_FLOAT_EQ(RateAt(*step, t), stepped[t]) << t;
  }
  // ApplyRows uses the same rate.
  float w = 0;
  float* row = &w;
  const float g = 1;
  step->ApplyRows(&row, nullptr, &g, 1, 1, /*clock=*/2, nullptr);
  EXPECT_FLOAT_EQ(w, -0.375f);
}

TEST(OptimizerTest, MakeOptimizerRefusesUnknownKinds) {
  proto::TableDef def = Def(static_cast<proto::OptimizerKind>(99), 0.1f);
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = MakeOptimizer(def);
  EXPECT_EQ(opt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(opt.status().message(), "table 't': unknown optimizer 99");
  def = Def(proto::OPT_SGD, 0.1f);
  def.set_lr_schedule(static_cast<proto::LrSchedule>(7));
  opt = MakeOptimizer(def);
  EXPECT_EQ(opt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(opt.status().message(), "table 't': unknown lr_schedule 7");
}

}  // namespace
}  // namespace ps
