#include "common/optimizer/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/optimizer/lbfgs_vectors.h"

namespace ps {
namespace {

// Each rule is written once, as a template over T: float (one value, the
// scalar path) or Lanes (kLanes values at a time, the vector path: fixed-size
// Eigen arrays, which compile to whole-register SIMD with no set-up or tail).
// The vector path updates every array of a run in one pass, in registers, so
// each crosses the memory bus once.
constexpr int kLanes = 16;
using Lanes = Eigen::Array<float, kLanes, 1>;

// The few functions the rules need beyond arithmetic, for both Ts. (Eigen's
// select and sign are not vectorized; min and max are.)
inline float Sqrt(float x) { return std::sqrt(x); }
inline Lanes Sqrt(const Lanes& x) { return x.sqrt(); }
inline float Max(float x, float floor) { return std::max(x, floor); }
inline Lanes Max(const Lanes& x, float floor) { return x.max(floor); }
// x limited to [-bound, bound].
inline float Clamp(float x, float bound) { return std::min(std::max(x, -bound), bound); }
inline Lanes Clamp(const Lanes& x, float bound) { return x.max(-bound).min(bound); }

// The rules. Each has kState floats of state per value, Initial(j) for slot
// j, At(lr, clock) giving a copy bound to one call's scheduled learning rate
// (and clock), and Update(w, s, g) applying gradient g to a value w whose
// state slots are s[0, kState). Per-call constants are folded in At, so
// Update does only per-value work.
// A rule whose only per-call constant is the rate, bound to `rate`.
template <typename Rule>
Rule WithRate(Rule rule, float rate) {
  rule.lr = rate;
  return rule;
}

struct Sgd {
  static constexpr int kState = 0;
  float lr = 0;

  float Initial(int) const { return 0; }
  Sgd At(float rate, uint64_t) const { return {rate}; }
  template <typename T>
  void Update(T& w, T*, const T& g) const {
    w -= lr * g;
  }
};

struct Adagrad {
  static constexpr int kState = 1;
  float initial_accumulator, epsilon;
  float lr = 0;

  float Initial(int) const { return initial_accumulator; }
  Adagrad At(float rate, uint64_t) const { return WithRate(*this, rate); }
  template <typename T>
  void Update(T& w, T* s, const T& g) const {
    T& acc = s[0];
    acc += g * g;
    w -= lr * g / (Sqrt(acc) + epsilon);
  }
};

// Momentum and, with kNesterov, Nesterov's look-ahead form.
template <bool kNesterov>
struct Momentum {
  static constexpr int kState = 1;
  float momentum;
  float lr = 0;

  float Initial(int) const { return 0; }
  Momentum At(float rate, uint64_t) const { return WithRate(*this, rate); }
  template <typename T>
  void Update(T& w, T* s, const T& g) const {
    T& v = s[0];
    v = momentum * v + g;
    if constexpr (kNesterov) {
      w -= lr * (g + momentum * v);
    } else {
      w -= lr * v;
    }
  }
};

struct RmsProp {
  static constexpr int kState = 1;
  float rho, epsilon;
  float lr = 0;

  float Initial(int) const { return 0; }
  RmsProp At(float rate, uint64_t) const { return WithRate(*this, rate); }
  template <typename T>
  void Update(T& w, T* s, const T& g) const {
    T& mean_square = s[0];
    mean_square = rho * mean_square + (1 - rho) * (g * g);
    w -= lr * g / (Sqrt(mean_square) + epsilon);
  }
};

struct Adam {
  static constexpr int kState = 2;
  float beta1, beta2, epsilon;
  // Bound by At: lr / (1 - beta1^n) and 1 / (1 - beta2^n), n = clock + 1.
  float m_scale = 0, v_scale = 0;

  float Initial(int) const { return 0; }
  Adam At(float rate, uint64_t clock) const {
    // In double: 1 - beta^n loses most of its digits in float when beta^n
    // is close to 1 (beta2 = 0.999, the first steps). Never 0: beta < 1.
    const double n = static_cast<double>(clock) + 1;
    Adam a = *this;
    a.m_scale = static_cast<float>(rate / (1 - std::pow(double{beta1}, n)));
    a.v_scale = static_cast<float>(1 / (1 - std::pow(double{beta2}, n)));
    return a;
  }
  template <typename T>
  void Update(T& w, T* s, const T& g) const {
    T& m = s[0];
    T& v = s[1];
    m = beta1 * m + (1 - beta1) * g;
    v = beta2 * v + (1 - beta2) * (g * g);
    w -= m_scale * m / (Sqrt(v_scale * v) + epsilon);
  }
};

struct Ftrl {
  static constexpr int kState = 2;
  float beta, l1, l2;
  float inv_alpha = 0;  // 1 / lr, bound by At

  float Initial(int) const { return 0; }
  Ftrl At(float rate, uint64_t) const {
    // A long LR_STEP decay can take the rate below the smallest float: alpha
    // stays positive, so 1 / alpha stays finite.
    Ftrl f = *this;
    f.inv_alpha = 1 / std::max(rate, kTiny);
    return f;
  }
  template <typename T>
  void Update(T& w, T* s, const T& g) const {
    T& z = s[0];
    T& n = s[1];
    const T root = Sqrt(n + g * g);
    // sigma * w as (sqrt difference) * (w / alpha): w shrinks as 1 / alpha
    // grows, so the product stays finite even for a tiny alpha.
    z += g - (root - Sqrt(n)) * (inv_alpha * w);
    n += g * g;
    // clamp(z) - z is -(z - sign(z) * l1) when |z| > l1 and exactly +0
    // otherwise: the zeros need no branch or select. The denominator is 0
    // only while n is (no gradient yet, so z is 0 too): the floor makes that
    // 0 / FLT_MIN = 0 rather than 0 / 0.
    const T denominator = Max((beta + root) * inv_alpha + l2, kTiny);
    w = (Clamp(z, l1) - z) / denominator;
  }

  static constexpr float kTiny = std::numeric_limits<float>::min();
};

// Loads the kState slots of kLanes consecutive values (interleaved, as in
// memory) into one Lanes per slot, and back. Two slots are split with whole-
// register shuffles: an element-wise loop gets half-register shuffles from
// GCC, whose stores Eigen then reloads as one register, stalling every
// iteration on a failed store forward.
using Floats = float __attribute__((vector_size(kLanes * sizeof(float))));
[[gnu::always_inline]] inline Floats LoadFloats(const float* p) {
  Floats v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline Lanes ToLanes(const Floats& v) {
  Lanes l;
  std::memcpy(l.data(), &v, sizeof v);
  return l;
}
[[gnu::always_inline]] inline Floats ToFloats(const Lanes& l) {
  Floats v;
  std::memcpy(&v, l.data(), sizeof v);
  return v;
}

template <int kState>
[[gnu::always_inline]] inline void LoadState(const float* s, Lanes* lanes) {
  static_assert(kState == 1 || kState == 2, "one or two floats of state per value");
  if constexpr (kState == 1) {
    lanes[0] = Eigen::Map<const Lanes>(s);
  } else {
    const Floats a = LoadFloats(s), b = LoadFloats(s + kLanes);
    lanes[0] = ToLanes(
        __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30));
    lanes[1] = ToLanes(
        __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31));
  }
}
template <int kState>
[[gnu::always_inline]] inline void StoreState(const Lanes* lanes, float* s) {
  if constexpr (kState == 1) {
    Eigen::Map<Lanes> out(s);
    out = lanes[0];
  } else {
    const Floats a = ToFloats(lanes[0]), b = ToFloats(lanes[1]);
    const Floats lo =
        __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const Floats hi =
        __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    std::memcpy(s, &lo, sizeof lo);
    std::memcpy(s + kLanes, &hi, sizeof hi);
  }
}

// Applies `rule` to n contiguous values with whole Lanes, and single values
// where a Lanes does not fit (a short row is all single values, with no
// vector set-up). In a long run, single values first bring w to a 64-byte
// boundary, as Eigen's own loops do: a vector store that straddles two cache
// lines costs two. The rule is taken by value: a local copy cannot alias w,
// so its constants stay in registers instead of being reloaded after every
// store.
template <typename Rule>
inline void UpdateRun(const Rule rule, float* w, float* s, const float* g, size_t n) {
  constexpr int kState = Rule::kState;
  size_t i = 0;
  if (n >= 2 * kLanes) {
    const size_t misaligned = reinterpret_cast<uintptr_t>(w) / sizeof(float) % kLanes;
    for (const size_t head = (kLanes - misaligned) % kLanes; i < head; ++i) {
      rule.Update(w[i], s + i * kState, g[i]);
    }
  }
  for (const size_t end = i + (n - i) / kLanes * kLanes; i < end; i += kLanes) {
    Lanes value = Eigen::Map<const Lanes>(w + i);
    const Lanes grad = Eigen::Map<const Lanes>(g + i);
    Lanes state[kState > 0 ? kState : 1];
    if constexpr (kState > 0) LoadState<kState>(s + i * kState, state);
    rule.Update(value, state, grad);
    if constexpr (kState > 0) StoreState<kState>(state, s + i * kState);
    Eigen::Map<Lanes> out(w + i);
    out = value;
  }
  for (; i < n; ++i) rule.Update(w[i], s + i * kState, g[i]);
}

// Step 2 (clipping, weight decay) on the gradient, into a local buffer: the
// caller's gradient is const, and the buffer stays in L1. Vectorized like
// UpdateRun, for the same reason.
struct GradientTransform {
  // Values per block of transformed gradient.
  static constexpr size_t kBlock = 1024;
  // clip_value when clipping by value is off: Clamp is then the identity
  // (gradients are finite), with no branch in the loop.
  static constexpr float kOff = std::numeric_limits<float>::infinity();

  float clip_value;  // kOff: off
  float clip_norm;   // 0: off
  float weight_decay;
  float trust = 1;  // LARS: the push's trust ratio (1: off)

  bool active() const {
    return clip_value != kOff || clip_norm > 0 || weight_decay > 0 || trust != 1;
  }
  // This transform with LARS' trust ratio of one push.
  GradientTransform Trusted(float push_trust) const {
    GradientTransform t = *this;
    t.trust = push_trust;
    return t;
  }

  template <typename T>
  T Transformed(const T& g, const T& w, float scale) const {
    return (Clamp(g, clip_value) * scale + weight_decay * w) * trust;
  }

  // What a row's clipped values are multiplied by for its L2 norm to be at
  // most clip_norm.
  float RowScale(const float* g, size_t width) const {
    if (clip_norm <= 0) return 1;
    Lanes sums = Lanes::Zero();
    size_t i = 0;
    for (; i + kLanes <= width; i += kLanes) {
      sums += Clamp(Lanes(Eigen::Map<const Lanes>(g + i)), clip_value).square();
    }
    float sum = sums.sum();
    for (; i < width; ++i) {
      const float x = Clamp(g[i], clip_value);
      sum += x * x;
    }
    const float norm = std::sqrt(sum);
    return norm > clip_norm ? clip_norm / norm : 1.0f;
  }

  // Calls fn(at, n, tg) for consecutive blocks [at, at + n) of the rows *
  // width values of w and g, tg holding the block's transformed gradient.
  // A row may span blocks: its scale is computed once, over the whole row,
  // when the row starts.
  template <typename Fn>
  void ForEachBlock(const float* w, const float* g, size_t rows, size_t width, Fn fn) const {
    float tg[kBlock];
    const size_t total = rows * width;
    size_t row_end = 0;
    float scale = 1;
    for (size_t at = 0; at < total; at += kBlock) {
      const size_t end = std::min(total, at + kBlock);
      for (size_t i = at; i < end;) {
        if (i == row_end) {
          scale = RowScale(g + i, width);
          row_end += width;
        }
        const size_t stop = std::min(row_end, end);
        for (; i + kLanes <= stop; i += kLanes) {
          Eigen::Map<Lanes>(tg + (i - at)) = Transformed(
              Lanes(Eigen::Map<const Lanes>(g + i)), Lanes(Eigen::Map<const Lanes>(w + i)), scale);
        }
        for (; i < stop; ++i) tg[i - at] = Transformed(g[i], w[i], scale);
      }
      fn(at, end - at, tg);
    }
  }
};

// Step 1: the learning rate for a push stamped with clock t.
struct Schedule {
  proto::LrSchedule kind;
  double learning_rate, gamma, decay_offset;
  uint64_t step_clocks, warmup_clocks;

  float Rate(uint64_t t) const {
    double lr = learning_rate;
    switch (kind) {
      case proto::LR_STEP:
        lr *= std::pow(gamma, static_cast<double>(t / step_clocks));
        break;
      case proto::LR_INV_SQRT:
        lr /= std::sqrt(decay_offset + static_cast<double>(t));
        break;
      default:  // LR_CONSTANT; MakeOptimizer refuses any other kind.
        break;
    }
    if (t < warmup_clocks) lr *= static_cast<double>(t + 1) / static_cast<double>(warmup_clocks);
    return static_cast<float>(lr);
  }
};

template <typename Rule>
class RuleOptimizer final : public Optimizer {
 public:
  RuleOptimizer(const Rule& rule, const Schedule& schedule, const GradientTransform& transform)
      : rule_(rule), schedule_(schedule), transform_(transform) {}

  int state_per_value() const override { return Rule::kState; }

  void InitState(float* state, size_t n) const override {
    if constexpr (Rule::kState > 0) {
      for (size_t i = 0; i < n; ++i) state[i] = rule_.Initial(i % Rule::kState);
    }
  }

  void ApplyTrusted(float* w, float* state, const float* g, size_t rows, size_t width,
                    uint64_t clock, float trust) const override {
    const Rule rule = rule_.At(schedule_.Rate(clock), clock);
    const GradientTransform transform = transform_.Trusted(trust);
    if (!transform.active()) {
      UpdateRun(rule, w, state, g, rows * width);
      return;
    }
    transform.ForEachBlock(w, g, rows, width, [&](size_t at, size_t n, const float* tg) {
      UpdateRun(rule, w + at, state + at * Rule::kState, tg, n);
    });
  }

  void ApplyRowsTrusted(float* const* w_rows, float* const* state_rows, const float* g,
                        size_t num_rows, size_t width, uint64_t clock, char* out,
                        float trust) const override {
    const auto state_of = [state_rows](size_t r) {
      return Rule::kState > 0 ? state_rows[r] : nullptr;
    };
    ApplyEachRow(w_rows, state_of, g, num_rows, width, clock, out, transform_.Trusted(trust),
                 [](float*) {});
  }

  void ApplySparseRows(float* const* rows, const float* g, size_t num_rows, size_t width,
                       size_t tag_at, uint32_t tag, uint64_t clock, char* out) const override {
    const auto state_of = [rows, width](size_t r) {
      return Rule::kState > 0 ? rows[r] + width : nullptr;
    };
    ApplyEachRow(rows, state_of, g, num_rows, width, clock, out, transform_,
                 [tag_at, tag](float* row) {
                   uint32_t t;
                   std::memcpy(&t, row + tag_at, sizeof t);
                   if (tag > t) std::memcpy(row + tag_at, &tag, sizeof tag);
                 });
  }

 private:
  // The rule (on transformed gradients when clipping, decay or LARS are on) on each
  // row: row r at w_rows[r], its state at state_of(r); after(row) once the
  // row is updated.
  template <typename StateOf, typename After>
  void ApplyEachRow(float* const* w_rows, StateOf state_of, const float* g, size_t num_rows,
                    size_t width, uint64_t clock, char* out, const GradientTransform& transform,
                    After after) const {
    const Rule rule = rule_.At(schedule_.Rate(clock), clock);
    if (!transform.active() && width == 1) {
      // Rows of one value (logistic regression's weights, biases): the
      // rule's scalar form inline, and a 4-byte read-back, instead of a
      // call of UpdateRun and of memcpy per row.
      ForEachRow<1>(w_rows, state_of, num_rows, width, out, after,
                    [&](float* w, float* s, size_t r) { rule.Update(*w, s, g[r]); });
      return;
    }
    if (!transform.active()) {
      ForEachRow(w_rows, state_of, num_rows, width, out, after, [&](float* w, float* s, size_t r) {
        UpdateRun(rule, w, s, g + r * width, width);
      });
      return;
    }
    ForEachRow(w_rows, state_of, num_rows, width, out, after, [&](float* w, float* s, size_t r) {
      transform.ForEachBlock(w, g + r * width, 1, width, [&](size_t at, size_t n, const float* tg) {
        UpdateRun(rule, w + at, s + at * Rule::kState, tg, n);
      });
    });
  }

  // Calls update(row, its state, r) then after(row) for each row in order,
  // prefetching the rows (and state) kAhead ahead, and copies each row's
  // result to `out`. kWidth: the width when known at compile time (0: not).
  template <size_t kWidth = 0, typename StateOf, typename After, typename Update>
  static void ForEachRow(float* const* w_rows, StateOf state_of, size_t num_rows, size_t width,
                         char* out, After after, Update update) {
    if constexpr (kWidth > 0) width = kWidth;
    // Far enough ahead for a miss to resolve, near enough to stay in cache.
    constexpr size_t kAhead = 8;
    for (size_t r = 0; r < num_rows; ++r) {
      if (r + kAhead < num_rows) {
        __builtin_prefetch(w_rows[r + kAhead], 1);
        if constexpr (Rule::kState > 0) __builtin_prefetch(state_of(r + kAhead), 1);
      }
      float* row = w_rows[r];
      update(row, state_of(r), r);
      after(row);
      if (out != nullptr) {
        std::memcpy(out + r * width * sizeof(float), row, width * sizeof(float));
      }
    }
  }

  const Rule rule_;
  const Schedule schedule_;
  const GradientTransform transform_;
};

template <typename Rule>
std::unique_ptr<Optimizer> Make(const Rule& rule, const Schedule& schedule,
                                const GradientTransform& transform) {
  return std::make_unique<RuleOptimizer<Rule>>(rule, schedule, transform);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const proto::TableDef& def) {
  if (!proto::LrSchedule_IsValid(def.lr_schedule())) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", def.name(), "': unknown lr_schedule ", def.lr_schedule()));
  }
  // ValidateTableDef refuses lr_step_clocks 0 for LR_STEP; the max keeps an
  // unvalidated definition from dividing by zero in the server.
  const Schedule schedule{def.lr_schedule(),
                          def.learning_rate(),
                          def.lr_gamma(),
                          def.lr_decay_offset(),
                          std::max<uint64_t>(def.lr_step_clocks(), 1),
                          def.warmup_clocks()};
  const GradientTransform transform{
      def.clip_value() > 0 ? def.clip_value() : GradientTransform::kOff, def.clip_norm(),
      def.weight_decay()};
  switch (def.optimizer()) {
    case proto::OPT_SGD:
      return Make(Sgd{}, schedule, transform);
    case proto::OPT_ADAGRAD:
      return Make(Adagrad{def.initial_accumulator(), def.epsilon()}, schedule, transform);
    case proto::OPT_MOMENTUM:
      return Make(Momentum<false>{def.momentum()}, schedule, transform);
    case proto::OPT_NESTEROV:
      return Make(Momentum<true>{def.momentum()}, schedule, transform);
    case proto::OPT_RMSPROP:
      return Make(RmsProp{def.rho(), def.epsilon()}, schedule, transform);
    case proto::OPT_ADAM:
      return Make(Adam{def.beta1(), def.beta2(), def.epsilon()}, schedule, transform);
    case proto::OPT_FTRL:
      return Make(Ftrl{def.ftrl_beta(), def.l1(), def.l2()}, schedule, transform);
    case proto::OPT_LBFGS:
      return MakeLbfgsAccumulator(def);
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("table '", def.name(), "': unknown optimizer ", def.optimizer()));
  }
}

}  // namespace ps
