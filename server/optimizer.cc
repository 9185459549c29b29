#include "server/optimizer.h"

#include <algorithm>
#include <cmath>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ps {
namespace {

using Vec = Eigen::Map<Eigen::ArrayXf>;
using ConstVec = Eigen::Map<const Eigen::ArrayXf>;

class Sgd final : public Optimizer {
 public:
  explicit Sgd(float lr) : lr_(lr) {}
  int state_per_value() const override { return 0; }
  void InitState(float*, size_t) const override {}
  void Apply(float* w, float*, const float* g, size_t n) const override {
    Vec(w, n) -= lr_ * ConstVec(g, n);
  }
  void ApplySmall(float* w, float*, const float* g, size_t n) const override {
    for (size_t i = 0; i < n; ++i) w[i] -= lr_ * g[i];
  }

 private:
  const float lr_;
};

class Adagrad final : public Optimizer {
 public:
  Adagrad(float lr, float init_acc, float eps) : lr_(lr), init_acc_(init_acc), eps_(eps) {}
  int state_per_value() const override { return 1; }
  void InitState(float* state, size_t n) const override { Vec(state, n).setConstant(init_acc_); }
  // Both updates run over one cache-sized block at a time, so each array
  // crosses the memory bus once (two separate Eigen statements would stream
  // the accumulator and gradient twice).
  void Apply(float* w, float* state, const float* g, size_t n) const override {
    constexpr size_t kBlock = 1024;
    for (size_t i = 0; i < n; i += kBlock) {
      const size_t m = std::min(kBlock, n - i);
      Vec acc(state + i, m);
      ConstVec grad(g + i, m);
      acc += grad.square();
      Vec(w + i, m) -= lr_ * grad / (acc.sqrt() + eps_);
    }
  }
  void ApplySmall(float* w, float* state, const float* g, size_t n) const override {
    for (size_t i = 0; i < n; ++i) {
      state[i] += g[i] * g[i];
      w[i] -= lr_ * g[i] / (std::sqrt(state[i]) + eps_);
    }
  }

 private:
  const float lr_, init_acc_, eps_;
};

}  // namespace

std::unique_ptr<Optimizer> MakeSgd(float learning_rate) {
  return std::make_unique<Sgd>(learning_rate);
}

std::unique_ptr<Optimizer> MakeAdagrad(float learning_rate, float initial_accumulator,
                                       float epsilon) {
  return std::make_unique<Adagrad>(learning_rate, initial_accumulator, epsilon);
}

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const proto::TableDef& def) {
  switch (def.optimizer()) {
    case proto::OPT_SGD:
      return MakeSgd(def.learning_rate());
    case proto::OPT_ADAGRAD:
      return MakeAdagrad(def.learning_rate(), def.initial_accumulator(), def.epsilon());
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("table '", def.name(), "': unknown optimizer ", def.optimizer()));
  }
}

}  // namespace ps
