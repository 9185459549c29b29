// Server-side update rules (proto::OptimizerKind) with gradient clipping,
// weight decay and a learning-rate schedule, applied to the rows of a table.
//
// An Optimizer is built once per table from its definition and is immutable;
// Apply and ApplyRows are thread-safe as long as callers do not share the
// memory they write (the store holds the slice lock). The caller owns the
// values and the state; the optimizer only says how much state it needs.
//
// One call applies one push, stamped with the worker's clock t:
//   1. lr = learning_rate, scheduled by lr_schedule:
//        LR_CONSTANT  lr
//        LR_STEP      lr * lr_gamma ^ floor(t / lr_step_clocks)
//        LR_INV_SQRT  lr / sqrt(lr_decay_offset + t)
//      then, for t < warmup_clocks, lr *= (t + 1) / warmup_clocks.
//   2. Per row (width values) of the gradient g, each step off when its
//      parameter is 0: every value clipped to [-clip_value, clip_value]; the
//      row scaled by clip_norm / ||g|| when its L2 norm ||g|| > clip_norm;
//      g += weight_decay * w (w before this update); with LARS, g *= the
//      push's trust ratio (ApplyTrusted).
//   3. The rule, per value:
//        SGD       w -= lr * g
//        AdaGrad   acc += g^2; w -= lr * g / (sqrt(acc) + epsilon)
//        Momentum  v = momentum * v + g; w -= lr * v
//        Nesterov  v = momentum * v + g; w -= lr * (g + momentum * v)
//        RMSProp   s = rho * s + (1 - rho) * g^2; w -= lr * g / (sqrt(s) + epsilon)
//        Adam      m = beta1 * m + (1 - beta1) * g; v = beta2 * v + (1 - beta2) * g^2;
//                  with n = t + 1, w -= lr * (m / (1 - beta1^n))
//                                    / (sqrt(v / (1 - beta2^n)) + epsilon)
//        FTRL      (FTRL-Proximal, McMahan et al. 2013; alpha = lr)
//                  sigma = (sqrt(n + g^2) - sqrt(n)) / alpha;
//                  z += g - sigma * w; n += g^2;
//                  w = 0 when |z| <= l1 (exactly zero), else
//                  w = -(z - sign(z) * l1) / ((ftrl_beta + sqrt(n)) / alpha + l2)
//      All state starts at 0 except AdaGrad's acc (initial_accumulator).
//
// State layout: state_per_value() floats per value, interleaved: the state of
// value i of a run is state[i * state_per_value() + j], j in [0,
// state_per_value()), the slots being AdaGrad {acc}, Momentum and Nesterov
// {v}, RMSProp {s}, Adam {m, v}, FTRL {z, n}. So the state of the values
// starting at offset `at` starts at state + at * state_per_value(), and a
// row's state is self-contained (width * state_per_value() floats).
//
// Runs go through a vector kernel 16 values at a time, whose square root is
// Eigen's fast one (within a few ulps), and a scalar loop for what is left
// (all of a row shorter than 16, a long run's head up to a 64-byte boundary
// and its tail): the last bits of a result may depend on which one it took.
#ifndef PS_COMMON_OPTIMIZER_OPTIMIZER_H_
#define PS_COMMON_OPTIMIZER_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "proto/ps.pb.h"

namespace ps {

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // Floats of optimizer state kept per parameter value (0 for SGD).
  virtual int state_per_value() const = 0;

  // Writes the initial state to n floats at `state`: the state of n /
  // state_per_value() values (n is a float count, a multiple of
  // state_per_value(), as callers size state buffers: 0 for SGD).
  virtual void InitState(float* state, size_t n) const = 0;

  // Applies gradients g to `rows` consecutive rows of `width` values at w
  // (their state at `state`, rows * width * state_per_value() floats in the
  // layout above; may be null when state_per_value() is 0), for a push
  // stamped with worker clock `clock`. g is not modified.
  void Apply(float* w, float* state, const float* g, size_t rows, size_t width,
             uint64_t clock) const {
    ApplyTrusted(w, state, g, rows, width, clock, 1.0f);
  }

  // Rows scattered in memory (rows of a key list, or of a sparse table): row r
  // is at w_rows[r] (its state at state_rows[r], width * state_per_value()
  // floats; state_rows may be null when state_per_value() is 0) and gets
  // gradient g + r * width. A row may be listed twice: updated twice, in
  // order. With `out`, row r's new values are copied to out + r * width *
  // sizeof(float) (bytes, any alignment). Upcoming rows are prefetched (they
  // are scattered in memory).
  void ApplyRows(float* const* w_rows, float* const* state_rows, const float* g, size_t num_rows,
                 size_t width, uint64_t clock, char* out) const {
    ApplyRowsTrusted(w_rows, state_rows, g, num_rows, width, clock, out, 1.0f);
  }

  // LARS (TableDef lars_eta; lars.h): as Apply and ApplyRows, with each
  // gradient value after clipping and weight decay multiplied by `trust`
  // (the layer's trust ratio, LarsTrust) before the rule.
  virtual void ApplyTrusted(float* w, float* state, const float* g, size_t rows, size_t width,
                            uint64_t clock, float trust) const = 0;
  virtual void ApplyRowsTrusted(float* const* w_rows, float* const* state_rows, const float* g,
                                size_t num_rows, size_t width, uint64_t clock, char* out,
                                float trust) const = 0;

  // Rows of a sparse table (server/sparse_rows.h): row r at rows[r] holds
  // its `width` values followed by their state (width * state_per_value()
  // floats), and gets gradient g + r * width; after its update, the uint32
  // stored `tag_at` floats into the row (its change tag) is raised to `tag`
  // when lower. Otherwise as ApplyRows: one pass over the rows, no array of
  // state pointers.
  virtual void ApplySparseRows(float* const* rows, const float* g, size_t num_rows, size_t width,
                               size_t tag_at, uint32_t tag, uint64_t clock, char* out) const = 0;
};

// From a table definition (validated by ValidateTableDef). Errors:
// INVALID_ARGUMENT naming the table for an unknown optimizer or lr_schedule.
absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const proto::TableDef& def);

}  // namespace ps

#endif  // PS_COMMON_OPTIMIZER_OPTIMIZER_H_
