#include "worker/lbfgs/test_objectives.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ps {
namespace lbfgs {

absl::StatusOr<double> FunctionObjective::Evaluate() {
  std::vector<double>& g = space_->vec(kG);
  std::fill(g.begin(), g.end(), 0.0);
  ++calls_;
  return f_(space_->vec(kW), &g);
}

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

std::vector<double> GradientAt(const Function& f, const std::vector<double>& x) {
  std::vector<double> g(x.size(), 0.0);
  f(x, &g);
  return g;
}

double Quadratic(const std::vector<double>& x, std::vector<double>* g) {
  const double ax0 = 3 * x[0] + x[1], ax1 = x[0] + 2 * x[1];
  (*g)[0] += ax0 - 1;
  (*g)[1] += ax1 - 1;
  return 0.5 * (x[0] * ax0 + x[1] * ax1) - x[0] - x[1];
}

double Rosenbrock(const std::vector<double>& x, std::vector<double>* g) {
  double f = 0;
  for (size_t i = 0; i + 1 < x.size(); i += 2) {
    const double a = x[i + 1] - x[i] * x[i], b = 1 - x[i];
    f += 100 * a * a + b * b;
    (*g)[i] += -400 * a * x[i] - 2 * b;
    (*g)[i + 1] += 200 * a;
  }
  return f;
}

std::vector<double> RosenbrockStart(size_t n) {
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = i % 2 == 0 ? -1.2 : 1.0;
  return x;
}

double Logistic(const std::vector<double>& w, std::vector<double>* g) {
  static const double kPoints[6][3] = {
      // x0, x1, label
      {1.0, 2.0, 1},    {2.0, 1.0, 1},    {0.5, -1.0, 1},
      {-1.0, -1.5, -1}, {-2.0, -0.5, -1}, {1.5, 0.5, -1},
  };
  constexpr double kL2 = 0.1;
  double f = 0;
  for (const auto& p : kPoints) {
    const double margin = p[2] * (w[0] * p[0] + w[1] * p[1]);
    f += std::log1p(std::exp(-margin)) / 6;
    const double coef = -p[2] / (1 + std::exp(margin)) / 6;  // d loss / d (w . x)
    (*g)[0] += coef * p[0];
    (*g)[1] += coef * p[1];
  }
  f += kL2 / 2 * (w[0] * w[0] + w[1] * w[1]);
  (*g)[0] += kL2 * w[0];
  (*g)[1] += kL2 * w[1];
  return f;
}

double Diagonal(const std::vector<double>& x, std::vector<double>* g) {
  double f = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double a = std::pow(10.0, static_cast<double>(i % 10) / 3);
    (*g)[i] += a * x[i] - 1;
    f += 0.5 * a * x[i] * x[i] - x[i];
  }
  return f;
}

}  // namespace lbfgs
}  // namespace ps
