// The vectors of one L-BFGS table and the small commands ("vector ops") that the
// optimizer's coordinator sends to wherever they live: the parameter-server shards, each
// applying the ops to its slice and returning partial dot products, or memory in tests.
//
// VectorSpace and Objective are interfaces the coordinator holds but does not own.
// MemoryVectorSpace owns its vectors; it is not thread-safe (one caller at a time).
#ifndef PS_WORKER_LBFGS_VECTOR_SPACE_H_
#define PS_WORKER_LBFGS_VECTOR_SPACE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ps {
namespace lbfgs {

// Named vectors of one L-BFGS table: index 0 is the table's values (the point W where
// gradients are evaluated), index 1 + j the optimizer state slot j on the servers.
inline constexpr int kW = 0;   // parameters (trial point)
inline constexpr int kX = 1;   // accepted iterate x_k
inline constexpr int kG = 2;   // gradient accumulator (gradient at W once an evaluation finished)
inline constexpr int kGk = 3;  // gradient at x_k
inline constexpr int kD = 4;   // search direction
inline constexpr int S(int i) { return 5 + i; }               // history s_i, i in [0, m)
inline constexpr int Y(int i, int m) { return 5 + m + i; }    // history y_i, i in [0, m)
inline constexpr int NumVectors(int m) { return 5 + 2 * m; }  // state slots = NumVectors(m) - 1

// One command applied to every element of the named vectors.
struct VecOp {
  enum Kind { kDot, kAxpy, kScale, kCopy };
  Kind kind;
  int dst;
  int src;
  double alpha;
  // kDot: result += sum_i dst[i] * src[i] (writes nothing); kAxpy: dst += alpha * src;
  // kScale: dst *= alpha (alpha == 0 sets exactly 0, even over NaN; src unused);
  // kCopy: dst = src.
};

inline VecOp DotOp(int a, int b) { return VecOp{VecOp::kDot, a, b, 0.0}; }
inline VecOp AxpyOp(int dst, int src, double alpha) { return VecOp{VecOp::kAxpy, dst, src, alpha}; }
inline VecOp ScaleOp(int dst, double alpha) { return VecOp{VecOp::kScale, dst, dst, alpha}; }
inline VecOp CopyOp(int dst, int src) { return VecOp{VecOp::kCopy, dst, src, 0.0}; }

// "kDot", "kAxpy", ... for messages.
const char* KindName(VecOp::Kind kind);

// Checks that every vector an op reads or writes is in [0, num_vectors) and that its kind is
// known. OK, or INVALID_ARGUMENT naming the first bad op's index, kind and vector index.
// For every VectorSpace implementation (the servers validate a batch with it before
// applying any of it).
absl::Status ValidateOps(const std::vector<VecOp>& ops, int num_vectors);

// Applies `op` to the elements [0, n) of `vecs` (pointers to the vectors, indexed by vector
// number; the op must be valid). Returns the op's partial dot product (0 unless kDot).
// Shared by MemoryVectorSpace and by a server applying ops to its slice.
double ApplyOp(const VecOp& op, double* const* vecs, size_t n);

// Where the vectors live (the servers, or memory in tests).
class VectorSpace {
 public:
  virtual ~VectorSpace() = default;
  // Applies ops in order, element by element; returns one sum per kDot op, in order.
  // Errors: INVALID_ARGUMENT for a bad op (nothing applied); implementations over a network
  // add their transport errors (UNAVAILABLE, DEADLINE_EXCEEDED: then some shards may have
  // applied the ops and others not).
  virtual absl::StatusOr<std::vector<double>> Run(const std::vector<VecOp>& ops) = 0;
};

// The function being minimized, evaluated where the vectors live.
class Objective {
 public:
  virtual ~Objective() = default;
  // f at the point in kW; on return kG holds the gradient of f at kW (the objective zeroes
  // and fills it). Errors are the caller's to return.
  virtual absl::StatusOr<double> Evaluate() = 0;
};

// A VectorSpace in memory: NumVectors(memory) vectors of n doubles (all zero at start), with
// accessors vec(int) for tests and for an in-memory objective; counts Run calls and ops.
class MemoryVectorSpace final : public VectorSpace {
 public:
  // `memory` (m >= 0) is the number of history pairs the space has room for.
  MemoryVectorSpace(int memory, size_t n);

  // As VectorSpace::Run. Errors (nothing applied, the call not counted): INVALID_ARGUMENT
  // from ValidateOps; FAILED_PRECONDITION when a vector was resized through vec().
  absl::StatusOr<std::vector<double>> Run(const std::vector<VecOp>& ops) override;

  // Vector i, 0 <= i < num_vectors() (not checked). Its elements may be changed freely, its
  // size not.
  std::vector<double>& vec(int i) { return vecs_[i]; }
  const std::vector<double>& vec(int i) const { return vecs_[i]; }

  int num_vectors() const { return static_cast<int>(vecs_.size()); }
  size_t size() const { return n_; }
  // Successful Run calls, and ops in them, so far.
  int64_t runs() const { return runs_; }
  int64_t ops() const { return ops_; }

 private:
  const size_t n_;
  std::vector<std::vector<double>> vecs_;
  int64_t runs_ = 0;
  int64_t ops_ = 0;
};

}  // namespace lbfgs
}  // namespace ps

#endif  // PS_WORKER_LBFGS_VECTOR_SPACE_H_
