#include "common/optimizer/lars.h"

#include <limits>
#include <vector>

#include "common/optimizer/optimizer.h"
#include "common/optimizer/optimizer_test_util.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

proto::TableDef LarsDef(proto::OptimizerKind kind, float eta, float beta) {
  proto::TableDef def = Def(kind, 0.5f);
  def.set_lars_eta(eta);
  def.set_lars_beta(beta);
  return def;
}

proto::LayerNorms Norms(float weight, float gradient) {
  proto::LayerNorms n;
  n.set_weight(weight);
  n.set_gradient(gradient);
  return n;
}

TEST(LarsTest, LayerNormsAreL2NormsOfTheWholeLayer) {
  const std::vector<float> w = {3, 0, -4};
  const std::vector<float> g = {1, 2, 2, 0};
  const proto::LayerNorms n = LayerNormsOf(w, g);
  EXPECT_FLOAT_EQ(n.weight(), 5.0f);
  EXPECT_FLOAT_EQ(n.gradient(), 3.0f);
}

TEST(LarsTest, TrustRatioByHand) {
  const proto::TableDef def = LarsDef(proto::OPT_SGD, 0.001f, 0.01f);
  const proto::LayerNorms n = Norms(3, 4);
  absl::StatusOr<float> trust = LarsTrust(def, &n);
  ASSERT_TRUE(trust.ok()) << trust.status();
  // 0.001 * 3 / (4 + 0.01 * 3)
  EXPECT_NEAR(*trust, 0.003 / 4.03, 1e-9);
}

TEST(LarsTest, ZeroNormOrLarsOffMeansOne) {
  const proto::TableDef def = LarsDef(proto::OPT_SGD, 0.001f, 0.01f);
  const proto::LayerNorms zero_w = Norms(0, 4);
  const proto::LayerNorms zero_g = Norms(3, 0);
  EXPECT_EQ(*LarsTrust(def, &zero_w), 1.0f);
  EXPECT_EQ(*LarsTrust(def, &zero_g), 1.0f);
  // Without LARS, norms are not needed and ignored.
  const proto::TableDef off = Def(proto::OPT_SGD, 0.5f);
  const proto::LayerNorms n = Norms(3, 4);
  EXPECT_EQ(*LarsTrust(off, nullptr), 1.0f);
  EXPECT_EQ(*LarsTrust(off, &n), 1.0f);
}

TEST(LarsTest, RefusesMissingOrBadNorms) {
  const proto::TableDef def = LarsDef(proto::OPT_SGD, 0.001f, 0);
  absl::StatusOr<float> missing = LarsTrust(def, nullptr);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("table 't' uses LARS"), absl::string_view::npos)
      << missing.status();
  for (const proto::LayerNorms& bad :
       {Norms(-1, 1), Norms(1, std::numeric_limits<float>::quiet_NaN()),
        Norms(std::numeric_limits<float>::infinity(), 1)}) {
    absl::StatusOr<float> trust = LarsTrust(def, &bad);
    EXPECT_EQ(trust.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(trust.status().message().find("layer_norms must be finite and >= 0"),
              absl::string_view::npos)
        << trust.status();
  }
}

// The trust ratio scales the gradient after weight decay, before the rule.
TEST(LarsTest, SgdStepScaledAfterWeightDecay) {
  proto::TableDef def = LarsDef(proto::OPT_SGD, 0.001f, 0);
  def.set_weight_decay(0.1f);
  std::unique_ptr<Optimizer> opt = Make(def);
  std::vector<float> w = {1.0f, -2.0f};
  const std::vector<float> g = {2.0f, 0.5f};
  opt->ApplyTrusted(w.data(), nullptr, g.data(), 2, 1, 0, 0.25f);
  // w -= 0.5 * 0.25 * (g + 0.1 * w)
  EXPECT_FLOAT_EQ(w[0], 1.0f - 0.125f * (2.0f + 0.1f));
  EXPECT_FLOAT_EQ(w[1], -2.0f - 0.125f * (0.5f - 0.2f));
}

// Momentum accumulates the scaled gradient (You et al.'s form): v = m v +
// trust * g; w -= lr * v.
TEST(LarsTest, MomentumAccumulatesTheScaledGradient) {
  proto::TableDef def = LarsDef(proto::OPT_MOMENTUM, 0.001f, 0);
  def.set_momentum(0.9f);
  std::unique_ptr<Optimizer> opt = Make(def);
  Params p(*opt, {1.0f});
  opt->ApplyTrusted(p.w.data(), p.state.data(), std::vector<float>{2.0f}.data(), 1, 1, 0, 0.5f);
  opt->ApplyTrusted(p.w.data(), p.state.data(), std::vector<float>{2.0f}.data(), 1, 1, 1, 0.25f);
  const float v1 = 0.5f * 2.0f;
  const float v2 = 0.9f * v1 + 0.25f * 2.0f;
  EXPECT_FLOAT_EQ(p.state[0], v2);
  EXPECT_FLOAT_EQ(p.w[0], 1.0f - 0.5f * v1 - 0.5f * v2);
}

// Scattered rows (a key-list push) get the same step as a run.
TEST(LarsTest, RowsAsARun) {
  const proto::TableDef def = LarsDef(proto::OPT_NESTEROV, 0.001f, 0);
  std::unique_ptr<Optimizer> opt = Make(def);
  std::vector<float> run = {0.5f, -1.5f, 2.0f};
  std::vector<float> rows = run;
  std::vector<float> run_state(3, 0.0f), rows_state(3, 0.0f);
  const std::vector<float> g = {0.3f, -0.7f, 1.1f};
  opt->ApplyTrusted(run.data(), run_state.data(), g.data(), 3, 1, 0, 0.4f);
  float* w_rows[] = {&rows[0], &rows[1], &rows[2]};
  float* s_rows[] = {&rows_state[0], &rows_state[1], &rows_state[2]};
  opt->ApplyRowsTrusted(w_rows, s_rows, g.data(), 3, 1, 0, nullptr, 0.4f);
  EXPECT_EQ(run, rows);
  std::vector<float> plain = {0.5f, -1.5f, 2.0f};
  std::vector<float> plain_state(3, 0.0f);
  opt->Apply(plain.data(), plain_state.data(), g.data(), 3, 1, 0);
  EXPECT_NE(plain, run);  // the ratio did change the step
}

}  // namespace
}  // namespace ps
