// Sandblaster L-BFGS on the servers: the named vectors of an OPT_LBFGS table
// and the two things the servers do with them. A push adds its gradient to
// the accumulator G (the parameters do not move); the coordinator's
// VectorOps (proto::VectorOp) combine the vectors element by element and
// return partial dot products. Pure functions on caller-owned memory.
//
// Vector v of value i: v = 0 is the value itself (the point W where workers
// evaluate gradients); v = 1 + j is optimizer state slot j, stored
// interleaved as every optimizer's state (optimizer.h): state[i * spv + j],
// spv = LbfgsStatePerValue(m). The coordinator's names for them
// (worker/lbfgs/vector_space.h): 1 X (accepted iterate), 2 G (gradient
// accumulator), 3 Gk (gradient at X), 4 D (direction), 5 + i s_i and
// 5 + m + i y_i for the m history pairs.
#ifndef PS_COMMON_OPTIMIZER_LBFGS_VECTORS_H_
#define PS_COMMON_OPTIMIZER_LBFGS_VECTORS_H_

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/optimizer/optimizer.h"
#include "proto/ps.pb.h"

namespace ps {

// The state slot of the gradient accumulator (vector 2).
inline constexpr int kLbfgsGradientSlot = 1;
// Largest lbfgs_memory a table may ask for.
inline constexpr int kMaxLbfgsMemory = 64;
// State floats per value of a table keeping `memory` history pairs.
inline constexpr int LbfgsStatePerValue(int memory) { return 4 + 2 * memory; }

// The accumulating "optimizer" of OPT_LBFGS tables (ValidateTableDef has
// checked lbfgs_memory). Thread-safe as every Optimizer.
std::unique_ptr<Optimizer> MakeLbfgsAccumulator(const proto::TableDef& def);

// Checks that every op names a vector of a table with `state_per_value`
// slots (0 .. state_per_value). INVALID_ARGUMENT naming the op's index, its
// vector and the table otherwise.
absl::Status CheckVectorOps(absl::Span<const proto::VectorOp> ops, int state_per_value,
                            absl::string_view table);

// Applies checked ops in order to n values at `values` (state at `state`,
// n * state_per_value floats), adding each DOT op's sum to partials[k] (k:
// the DOT's rank among the ops; partials holds one per DOT op). Sums are
// taken in double.
void RunVectorOps(absl::Span<const proto::VectorOp> ops, float* values, float* state, size_t n,
                  int state_per_value, absl::Span<double> partials);

}  // namespace ps

#endif  // PS_COMMON_OPTIMIZER_LBFGS_VECTORS_H_
