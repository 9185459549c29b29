// Helpers shared by the optimizer's tests (optimizer_test.cc,
// optimizer_rows_test.cc): table definitions, and values with their state.
#ifndef PS_COMMON_OPTIMIZER_OPTIMIZER_TEST_UTIL_H_
#define PS_COMMON_OPTIMIZER_OPTIMIZER_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "common/optimizer/optimizer.h"
#include "gtest/gtest.h"

namespace ps {

inline constexpr proto::OptimizerKind kAllKinds[] = {
    proto::OPT_SGD,     proto::OPT_ADAGRAD, proto::OPT_MOMENTUM, proto::OPT_NESTEROV,
    proto::OPT_RMSPROP, proto::OPT_ADAM,    proto::OPT_FTRL};

inline proto::TableDef Def(proto::OptimizerKind kind, float lr) {
  proto::TableDef def;
  def.set_name("t");
  def.set_width(1);
  def.set_num_keys(1);
  def.set_optimizer(kind);
  def.set_learning_rate(lr);
  return def;
}

// Every hyper-parameter set, so that every term of every rule counts.
inline proto::TableDef FullDef(proto::OptimizerKind kind) {
  proto::TableDef def = Def(kind, 0.1f);
  def.set_initial_accumulator(0.5f);
  def.set_epsilon(1e-3f);
  def.set_momentum(0.9f);
  def.set_rho(0.9f);
  def.set_beta1(0.9f);
  def.set_beta2(0.999f);
  def.set_ftrl_beta(1.0f);
  def.set_l1(0.01f);
  def.set_l2(0.1f);
  return def;
}

inline std::unique_ptr<Optimizer> Make(const proto::TableDef& def) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = MakeOptimizer(def);
  EXPECT_TRUE(opt.ok()) << opt.status();
  return opt.ok() ? *std::move(opt) : nullptr;
}

// Values and their optimizer state, stepped with Apply.
struct Params {
  Params(const Optimizer& opt, std::vector<float> values) : w(std::move(values)) {
    state.resize(w.size() * opt.state_per_value());
    opt.InitState(state.data(), state.size());
  }
  void Step(const Optimizer& opt, const std::vector<float>& g, uint64_t clock, size_t width = 1) {
    opt.Apply(w.data(), state.empty() ? nullptr : state.data(), g.data(), w.size() / width, width,
              clock);
  }
  std::vector<float> w, state;
};

}  // namespace ps

#endif  // PS_COMMON_OPTIMIZER_OPTIMIZER_TEST_UTIL_H_
