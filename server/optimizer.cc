#include "server/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ps {
namespace {

using Vec = Eigen::Map<Eigen::ArrayXf>;
using ConstVec = Eigen::Map<const Eigen::ArrayXf>;

// Optimizer::ApplyRows for a rule(w, state, g, n) applied to one row of
// state_per_value floats of state per value; inlined per rule.
template <typename Rule>
void ApplyRowsWith(const Rule& rule, int state_per_value, float* w, float* state,
                   const uint64_t* keys, size_t num_rows, uint64_t first_key, size_t width,
                   const float* g, char* out) {
  // Far enough ahead for a miss to resolve, near enough to stay in cache.
  constexpr size_t kAhead = 8;
  for (size_t r = 0; r < num_rows; ++r) {
    if (r + kAhead < num_rows) {
      const uint64_t ahead = (keys[r + kAhead] - first_key) * width;
      __builtin_prefetch(w + ahead, 1);
      if (state_per_value) __builtin_prefetch(state + ahead * state_per_value, 1);
    }
    const uint64_t at = (keys[r] - first_key) * width;
    float* row = w + at;
    rule(row, state_per_value ? state + at * state_per_value : nullptr, g + r * width, width);
    if (out != nullptr) std::memcpy(out + r * width * sizeof(float), row, width * sizeof(float));
  }
}

class Sgd final : public Optimizer {
 public:
  explicit Sgd(float lr) : lr_(lr) {}
  int state_per_value() const override { return 0; }
  void InitState(float*, size_t) const override {}
  void Apply(float* w, float*, const float* g, size_t n) const override {
    Vec(w, n) -= lr_ * ConstVec(g, n);
  }
  void ApplySmall(float* w, float*, const float* g, size_t n) const override { Small(w, g, n); }
  void ApplyRows(float* w, float* state, const uint64_t* keys, size_t num_rows, uint64_t first_key,
                 size_t width, const float* g, char* out) const override {
    auto rule = [this](float* w, float*, const float* g, size_t n) { Small(w, g, n); };
    ApplyRowsWith(rule, 0, w, state, keys, num_rows, first_key, width, g, out);
  }

 private:
  void Small(float* w, const float* g, size_t n) const {
    for (size_t i = 0; i < n; ++i) w[i] -= lr_ * g[i];
  }

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
    Small(w, state, g, n);
  }
  void ApplyRows(float* w, float* state, const uint64_t* keys, size_t num_rows, uint64_t first_key,
                 size_t width, const float* g, char* out) const override {
    auto rule = [this](float* w, float* state, const float* g, size_t n) { Small(w, state, g, n); };
    ApplyRowsWith(rule, 1, w, state, keys, num_rows, first_key, width, g, out);
  }

 private:
  void Small(float* w, float* state, const float* g, size_t n) const {
    for (size_t i = 0; i < n; ++i) {
      state[i] += g[i] * g[i];
      w[i] -= lr_ * g[i] / (std::sqrt(state[i]) + eps_);
    }
  }

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
