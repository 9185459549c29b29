// Test functions for the L-BFGS driver, evaluated on a MemoryVectorSpace's vectors: f at kW,
// its gradient into kG. FunctionObjective borrows the space; not thread-safe. Test-only.
#ifndef PS_WORKER_LBFGS_TEST_OBJECTIVES_H_
#define PS_WORKER_LBFGS_TEST_OBJECTIVES_H_

#include <cstddef>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/lbfgs/vector_space.h"

namespace ps {
namespace lbfgs {

// f(x), adding its gradient into *g (which the caller zeroes, sized as x).
using Function = std::function<double(const std::vector<double>& x, std::vector<double>* g)>;

// The Objective of a Function on the space's kW and kG.
class FunctionObjective : public Objective {
 public:
  FunctionObjective(MemoryVectorSpace* space, Function f) : space_(space), f_(std::move(f)) {}
  absl::StatusOr<double> Evaluate() override;
  int calls() const { return calls_; }  // Evaluate calls so far

 private:
  MemoryVectorSpace* const space_;
  const Function f_;
  int calls_ = 0;
};

double Dot(const std::vector<double>& a, const std::vector<double>& b);
// The gradient of f at x.
std::vector<double> GradientAt(const Function& f, const std::vector<double>& x);

// 2-D quadratic 1/2 x^T A x - b^T x, A = [[3, 1], [1, 2]], b = (1, 1): x* = A^-1 b = (0.2, 0.4)
// and f* = -b^T x* / 2 = -0.3. A's smallest eigenvalue is (5 - sqrt 5) / 2 > 1.38.
double Quadratic(const std::vector<double>& x, std::vector<double>* g);

// Extended Rosenbrock (Moré, Garbow & Hillstrom #21): independent 2-D Rosenbrock functions on
// the pairs (x_2i, x_2i+1), n even; its minimum is 0 at (1, ..., 1).
double Rosenbrock(const std::vector<double>& x, std::vector<double>* g);
// The classic start (-1.2, 1, -1.2, 1, ...).
std::vector<double> RosenbrockStart(size_t n);

// Mean logistic loss of 6 hand-made points (2 features, labels +-1, not separable) plus
// l2 / 2 |w|^2, l2 = 0.1: strictly convex.
double Logistic(const std::vector<double>& w, std::vector<double>* g);

// Separable quadratic sum_i a_i x_i^2 / 2 - x_i with a_i = 10^((i mod 10) / 3): condition
// number 1000, any n.
double Diagonal(const std::vector<double>& x, std::vector<double>* g);

}  // namespace lbfgs
}  // namespace ps

#endif  // PS_WORKER_LBFGS_TEST_OBJECTIVES_H_
