// LbfgsDriver: the coordinator of Sandblaster L-BFGS (Nocedal & Wright, Algorithms 7.4/7.5
// with a strong Wolfe line search, 3.5/3.6). It sees only scalars: every vector operation is a
// batch of VecOps sent to the VectorSpace, which returns dot products.
//
// The driver borrows the space and the objective (the caller keeps them alive during Run). It
// is not thread-safe: one Run at a time, and rounds() read from the thread that runs it.
#ifndef PS_WORKER_LBFGS_LBFGS_DRIVER_H_
#define PS_WORKER_LBFGS_LBFGS_DRIVER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/lbfgs/vector_space.h"

namespace ps {
namespace lbfgs {

struct LbfgsOptions {
  int memory = 10;             // m, history pairs (>= 1)
  int max_iterations = 100;    // accepted steps (>= 0)
  double gtol = 1e-5;          // stop when ||g||_2 <= gtol
  double ftol = 2.2e-9;        // stop when (f_k - f_{k+1}) / max(|f_k|, |f_{k+1}|, 1) <= ftol
  double c1 = 1e-4, c2 = 0.9;  // strong Wolfe constants, 0 < c1 < c2 < 1
  int max_line_search = 20;    // evaluations per line search (>= 1)
};

// After each accepted step.
struct IterationReport {
  int iteration;     // accepted steps so far (1 for the first)
  double f;          // at the new iterate
  double grad_norm;  // ||g||_2 there
  double step;       // the accepted line-search step alpha (along the direction in kD)
  int evaluations;   // Objective::Evaluate calls so far, the initial one included
};

struct LbfgsResult {
  double f;          // at the last accepted iterate (which kW, kX hold; kG, kGk its gradient)
  double grad_norm;  // ||g||_2 there
  int iterations;    // accepted steps
  int evaluations;   // Objective::Evaluate calls, the initial one included
  std::string stop_reason;  // "gtol", "ftol", "max_iterations" or "line_search"
};

class LbfgsDriver {
 public:
  // The space must have NumVectors(options.memory) vectors. Neither pointer is owned.
  LbfgsDriver(const LbfgsOptions& options, VectorSpace* space, Objective* objective);

  // Minimizes f from the point in kW. progress (may be empty) runs after each iteration.
  // On success the space holds the last accepted iterate in kW and kX and its gradient in kG
  // and kGk, also when the line search failed (stop_reason "line_search": no step satisfying
  // the strong Wolfe conditions within max_line_search evaluations, usually because f is at
  // rounding level; not an error). Errors: INVALID_ARGUMENT for bad options (naming the
  // field) or when f or its gradient at the start is not finite; any error of
  // VectorSpace::Run or Objective::Evaluate, returned as is (the vectors are then left
  // mid-step).
  absl::StatusOr<LbfgsResult> Run(const std::function<void(const IterationReport&)>& progress);

  // Vector-op rounds (VectorSpace::Run calls) made so far: tests check it is O(m) per
  // iteration. An iteration with h stored pairs and e line-search evaluations takes
  // 2h + 1 (direction, the last round placing the first trial point) + 2e - 1 (trials) + 1
  // (accept) rounds; a direction that is not downhill adds one round to start over from -g.
  int64_t rounds() const { return rounds_; }

 private:
  struct Trial {
    double phi;   // f(x + alpha d)
    double dphi;  // g(x + alpha d) . d
  };
  struct LineSearchResult {
    bool found;
    double alpha;
    Trial at;
  };

  absl::Status ValidateOptions() const;
  // One round of ops; returns its dot products.
  absl::StatusOr<std::vector<double>> Round(const std::vector<VecOp>& ops);
  // Sets kD to the L-BFGS direction from the stored pairs (two-loop recursion), puts the first
  // trial point x + alpha0 d in kW, and returns phi'(0) = gk . d.
  absl::StatusOr<double> Direction(double alpha0);
  // Evaluates at x + alpha d; `positioned` when kW already holds that point.
  absl::StatusOr<Trial> Evaluate(double alpha, bool positioned);
  // Algorithm 3.5: bracketing, then Zoom. The first trial point is already in kW.
  absl::StatusOr<LineSearchResult> LineSearch(double phi0, double dphi0, double alpha0);
  // Algorithm 3.6 between lo (sufficient decrease holds) and hi.
  absl::StatusOr<LineSearchResult> Zoom(double phi0, double dphi0, double lo, Trial at_lo,
                                        double hi, Trial at_hi, int* evaluations);
  // Writes s = W - X and y = G - Gk into the next ring slot and moves x_k to W, in one round;
  // keeps the pair unless s . y <= 1e-10 y . y (a refused pair has still overwritten the
  // slot, so with a full ring the oldest pair is dropped). Returns ||g||^2 at the new iterate.
  absl::StatusOr<double> Accept();

  // Storage slot of the k-th stored pair, k = 0 the oldest.
  int Slot(int k) const { return (next_slot_ - count_ + k + 2 * m_) % m_; }

  const LbfgsOptions options_;
  const int m_;
  VectorSpace* const space_;
  Objective* const objective_;

  int64_t rounds_ = 0;
  int evaluations_ = 0;

  // The history ring: count_ pairs in slots ending just before next_slot_.
  int count_ = 0;
  int next_slot_ = 0;
  std::vector<double> rho_;  // per slot: 1 / (s . y)
  std::vector<double> yy_;   // per slot: y . y
};

}  // namespace lbfgs
}  // namespace ps

#endif  // PS_WORKER_LBFGS_LBFGS_DRIVER_H_
