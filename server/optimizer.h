// Server-side update rules, applied to contiguous runs of a slice.
//
// An Optimizer is built once per table from its definition and is immutable;
// Apply is thread-safe as long as callers do not share the memory it writes
// (the store holds the slice lock). Kernels are Eigen maps over contiguous
// floats, so they vectorize.
#ifndef PS_SERVER_OPTIMIZER_H_
#define PS_SERVER_OPTIMIZER_H_

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

  // Initial state for n values (n * state_per_value() floats).
  virtual void InitState(float* state, size_t n) const = 0;

  // Applies gradient g to weights w (n values) and their state.
  virtual void Apply(float* w, float* state, const float* g, size_t n) const = 0;
  // The same for a few values (a row of a key list): a plain loop, without
  // the vector kernel's set-up.
  virtual void ApplySmall(float* w, float* state, const float* g, size_t n) const = 0;
  // Rows of a key list that lie in one slice, whose values start at w (its
  // state at `state`): row r is key keys[r], at (keys[r] - first_key) *
  // width, and gets gradient g + r * width; a key listed twice is updated
  // twice, in order. With `out`, row r's new values are copied to out + r *
  // width floats (bytes, any alignment). Upcoming rows are prefetched, since they are scattered.
  virtual void ApplyRows(float* w, float* state, const uint64_t* keys, size_t num_rows,
                         uint64_t first_key, size_t width, const float* g, char* out) const = 0;
};

// Plain SGD: w -= lr * g.
std::unique_ptr<Optimizer> MakeSgd(float learning_rate);

// AdaGrad (Duchi et al.; DistBelief's per-parameter learning rate):
//   acc += g * g;  w -= lr * g / (sqrt(acc) + epsilon), acc starting at
//   initial_accumulator.
std::unique_ptr<Optimizer> MakeAdagrad(float learning_rate, float initial_accumulator,
                                       float epsilon);

// From a table definition. Errors: INVALID_ARGUMENT for an unknown kind.
absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const proto::TableDef& def);

}  // namespace ps

#endif  // PS_SERVER_OPTIMIZER_H_
