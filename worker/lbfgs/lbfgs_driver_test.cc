#include "worker/lbfgs/lbfgs_driver.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/lbfgs/test_objectives.h"
#include "worker/lbfgs/vector_space.h"

namespace ps {
namespace lbfgs {
namespace {

using ::testing::HasSubstr;

TEST(LbfgsDriverTest, QuadraticReachesTheExactMinimum) {
  MemoryVectorSpace space(5, 2);
  space.vec(kW) = {-3, 2.5};
  FunctionObjective objective(&space, Quadratic);
  LbfgsOptions options;
  options.memory = 5;
  // |x - x*| <= |g| / 1.38 (A's smallest eigenvalue). Near 1e-9, f changes at its rounding
  // level and no further step can be verified.
  options.gtol = 1e-8;
  options.ftol = 0;
  LbfgsDriver driver(options, &space, &objective);
  absl::StatusOr<LbfgsResult> r = driver.Run(nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_reason, "gtol");
  EXPECT_NEAR(space.vec(kW)[0], 0.2, 1e-8);
  EXPECT_NEAR(space.vec(kW)[1], 0.4, 1e-8);
  EXPECT_NEAR(r->f, -0.3, 1e-12);
  EXPECT_LE(r->grad_norm, 1e-8);
  EXPECT_EQ(space.vec(kX), space.vec(kW));
  EXPECT_EQ(r->evaluations, objective.calls());
  EXPECT_LE(r->iterations, 10) << "L-BFGS on a 2-D quadratic converges in a few steps";
  EXPECT_EQ(driver.rounds(), space.runs()) << "every round is one VectorSpace::Run";
}

TEST(LbfgsDriverTest, StartAtTheMinimumStopsAtOnce) {
  MemoryVectorSpace space(3, 2);
  space.vec(kW) = {0.2, 0.4};
  FunctionObjective objective(&space, Quadratic);
  LbfgsOptions options;
  options.memory = 3;
  LbfgsDriver driver(options, &space, &objective);
  absl::StatusOr<LbfgsResult> r = driver.Run(nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_reason, "gtol");
  EXPECT_EQ(r->iterations, 0);
  EXPECT_EQ(r->evaluations, 1);
}

void ExpectRosenbrockSolved(size_t n) {
  MemoryVectorSpace space(7, n);
  space.vec(kW) = RosenbrockStart(n);
  FunctionObjective objective(&space, Rosenbrock);
  LbfgsOptions options;
  options.memory = 7;
  options.gtol = 1e-9;
  options.ftol = 0;
  options.max_iterations = 500;
  LbfgsDriver driver(options, &space, &objective);
  int reports = 0;
  double last_f = INFINITY;
  absl::StatusOr<LbfgsResult> r = driver.Run([&](const IterationReport& report) {
    ++reports;
    EXPECT_EQ(report.iteration, reports);
    EXPECT_LT(report.f, last_f) << "every accepted step decreases f";
    last_f = report.f;
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_reason, "gtol");
  EXPECT_EQ(reports, r->iterations);
  EXPECT_LT(r->iterations, 500);
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(space.vec(kW)[i], 1.0, 1e-5) << "x[" << i << "]";
  EXPECT_LT(r->f, 1e-10);
}

TEST(LbfgsDriverTest, Rosenbrock2D) { ExpectRosenbrockSolved(2); }
TEST(LbfgsDriverTest, Rosenbrock10D) { ExpectRosenbrockSolved(10); }

// Passes ops to a MemoryVectorSpace, noting the step of the last trial point the driver set
// (kW = kX + alpha kD).
class RecordingSpace : public VectorSpace {
 public:
  explicit RecordingSpace(MemoryVectorSpace* inner) : inner_(inner) {}
  absl::StatusOr<std::vector<double>> Run(const std::vector<VecOp>& ops) override {
    for (const VecOp& op : ops) {
      if (op.kind == VecOp::kAxpy && op.dst == kW && op.src == kD) trial_alpha = op.alpha;
    }
    return inner_->Run(ops);
  }
  double trial_alpha = 0;

 private:
  MemoryVectorSpace* const inner_;
};

// Logs every evaluation: the trial step and, computed here from the vectors the driver keeps
// on the space, phi(alpha), phi'(alpha), phi(0) and phi'(0).
class WolfeLogObjective : public Objective {
 public:
  struct Trial {
    double alpha, phi, dphi, phi0, dphi0;
  };
  WolfeLogObjective(MemoryVectorSpace* space, const RecordingSpace* recorder, Function f)
      : space_(space), recorder_(recorder), f_(std::move(f)) {}
  absl::StatusOr<double> Evaluate() override {
    std::vector<double>& g = space_->vec(kG);
    std::fill(g.begin(), g.end(), 0.0);
    const double phi = f_(space_->vec(kW), &g);
    if (first_) {
      first_ = false;
      return phi;
    }
    const std::vector<double>& x = space_->vec(kX);
    const std::vector<double>& d = space_->vec(kD);
    std::vector<double> gx(x.size(), 0.0);
    const double phi0 = f_(x, &gx);
    log.push_back({recorder_->trial_alpha, phi, Dot(g, d), phi0, Dot(gx, d)});
    return phi;
  }
  std::vector<Trial> log;

 private:
  MemoryVectorSpace* const space_;
  const RecordingSpace* const recorder_;
  const Function f_;
  bool first_ = true;
};

void ExpectStrongWolfeSteps(size_t n, const Function& f, std::vector<double> start) {
  MemoryVectorSpace space(4, n);
  space.vec(kW) = std::move(start);
  RecordingSpace recorder(&space);
  WolfeLogObjective objective(&space, &recorder, f);
  LbfgsOptions options;
  options.memory = 4;
  options.gtol = 1e-8;
  options.ftol = 0;
  options.max_iterations = 200;
  LbfgsDriver driver(options, &recorder, &objective);
  int accepted = 0;
  absl::StatusOr<LbfgsResult> r = driver.Run([&](const IterationReport& report) {
    ++accepted;
    ASSERT_FALSE(objective.log.empty());
    ASSERT_EQ(report.evaluations, static_cast<int>(objective.log.size()) + 1);
    const WolfeLogObjective::Trial& t = objective.log.back();  // the accepted trial
    SCOPED_TRACE(testing::Message() << "iteration " << report.iteration << " alpha " << t.alpha);
    EXPECT_EQ(t.alpha, report.step);
    EXPECT_EQ(t.phi, report.f);
    EXPECT_LT(t.dphi0, 0) << "a descent direction";
    const double slack = 1e-13 * std::max(1.0, std::abs(t.phi0));
    EXPECT_LE(t.phi, t.phi0 + options.c1 * t.alpha * t.dphi0 + slack) << "sufficient decrease";
    EXPECT_LE(std::abs(t.dphi), options.c2 * std::abs(t.dphi0) * (1 + 1e-9)) << "curvature";
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_reason, "gtol");
  EXPECT_EQ(accepted, r->iterations);
  EXPECT_GT(r->evaluations, r->iterations + 1) << "some line search needed more than one trial";
}

TEST(LbfgsDriverTest, AcceptedStepsSatisfyStrongWolfeOnRosenbrock) {
  ExpectStrongWolfeSteps(2, Rosenbrock, RosenbrockStart(2));
}

TEST(LbfgsDriverTest, AcceptedStepsSatisfyStrongWolfeOnLogistic) {
  // Far from the minimum, so the first steps need extrapolation.
  ExpectStrongWolfeSteps(2, Logistic, {30, -40});
}

TEST(LbfgsDriverTest, LogisticRegressionReachesAStationaryPoint) {
  MemoryVectorSpace space(10, 2);
  FunctionObjective objective(&space, Logistic);
  LbfgsOptions options;
  options.gtol = 1e-7;
  options.ftol = 0;
  LbfgsDriver driver(options, &space, &objective);
  absl::StatusOr<LbfgsResult> r = driver.Run(nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_reason, "gtol");
  const std::vector<double> w = space.vec(kW);
  const std::vector<double> g = GradientAt(Logistic, w);
  EXPECT_LE(std::sqrt(Dot(g, g)), 1e-6) << "independently computed gradient at the result";
  EXPECT_NEAR(std::sqrt(Dot(g, g)), r->grad_norm, 1e-12);
  std::vector<double> unused(2);
  EXPECT_DOUBLE_EQ(r->f, Logistic(w, &unused));
  EXPECT_LT(r->f, std::log(2.0)) << "below the loss at w = 0";
  // Strictly convex, so a stationary point is the minimum: every nearby point is higher.
  for (double dx : {-1e-3, 0.0, 1e-3}) {
    for (double dy : {-1e-3, 0.0, 1e-3}) {
      if (dx == 0 && dy == 0) continue;
      std::vector<double> near = {w[0] + dx, w[1] + dy}, g2(2, 0.0);
      EXPECT_GT(Logistic(near, &g2), r->f) << dx << " " << dy;
    }
  }
}

struct IterationRounds {
  int64_t rounds;       // VectorSpace::Run calls
  int64_t evaluations;  // line-search trials
};

std::vector<IterationRounds> RoundsPerIteration(size_t n, int m, int iterations) {
  MemoryVectorSpace space(m, n);
  FunctionObjective objective(&space, Diagonal);
  LbfgsOptions options;
  options.memory = m;
  options.gtol = 0;
  options.ftol = 0;
  options.max_iterations = iterations;
  LbfgsDriver driver(options, &space, &objective);
  std::vector<IterationRounds> per_iteration;
  int64_t rounds = 1, evaluations = 1;  // the start: one evaluation, one round
  absl::StatusOr<LbfgsResult> r = driver.Run([&](const IterationReport& report) {
    per_iteration.push_back({driver.rounds() - rounds, report.evaluations - evaluations});
    rounds = driver.rounds();
    evaluations = report.evaluations;
  });
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(driver.rounds(), space.runs());
  return per_iteration;
}

TEST(LbfgsDriverTest, RoundsPerIterationAreOrderMAndIndependentOfSize) {
  constexpr int kMemory = 5, kIterations = 25;
  for (size_t n : {100, 1000, 10000}) {
    SCOPED_TRACE(testing::Message() << "n = " << n);
    const std::vector<IterationRounds> rounds = RoundsPerIteration(n, kMemory, kIterations);
    ASSERT_EQ(rounds.size(), static_cast<size_t>(kIterations));
    for (int k = 0; k < kIterations; ++k) {
      // Iteration k + 1 has h = min(k, m) pairs: 2h + 1 rounds for the direction (the last
      // also placing the first trial point), 2 per further trial, 1 for each trial's
      // phi'(alpha), 1 to accept. Nothing depends on n.
      const int64_t h = std::min(k, kMemory);
      EXPECT_EQ(rounds[k].rounds, 2 * h + 2 * rounds[k].evaluations + 1) << "iteration " << k + 1;
      EXPECT_LE(rounds[k].rounds, 2 * kMemory + 8) << "iteration " << k + 1;
    }
  }
}

// Reports the gradient with the wrong sign: -g is then uphill and no step is accepted.
double WrongGradient(const std::vector<double>& x, std::vector<double>* g) {
  std::vector<double> tmp(x.size(), 0.0);
  const double f = Quadratic(x, &tmp);
  for (size_t i = 0; i < x.size(); ++i) (*g)[i] = -tmp[i];
  return f;
}

TEST(LbfgsDriverTest, FailedLineSearchReturnsToTheLastAcceptedPoint) {
  MemoryVectorSpace space(3, 2);
  space.vec(kW) = {1, 1};
  FunctionObjective objective(&space, WrongGradient);
  LbfgsOptions options;
  options.memory = 3;
  options.max_line_search = 6;
  LbfgsDriver driver(options, &space, &objective);
  absl::StatusOr<LbfgsResult> r = driver.Run(nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_reason, "line_search");
  EXPECT_EQ(r->iterations, 0);
  std::vector<double> g(2, 0.0);
  EXPECT_EQ(r->f, WrongGradient({1, 1}, &g));
  EXPECT_EQ(space.vec(kW), (std::vector<double>{1, 1}));
  EXPECT_EQ(space.vec(kG), g) << "the gradient of the point in kW";
  EXPECT_GE(r->evaluations, 2);
  EXPECT_LE(r->evaluations, 1 + options.max_line_search);
}

class FailingObjective : public Objective {
 public:
  FailingObjective(MemoryVectorSpace* space, int fail_on)
      : inner_(space, Quadratic), fail_on_(fail_on) {}
  absl::StatusOr<double> Evaluate() override {
    if (++calls_ == fail_on_) return absl::UnavailableError("worker 3 lost");
    return inner_.Evaluate();
  }

 private:
  FunctionObjective inner_;
  const int fail_on_;
  int calls_ = 0;
};

TEST(LbfgsDriverTest, ObjectiveErrorsAreReturned) {
  for (int fail_on : {1, 3}) {
    MemoryVectorSpace space(2, 2);
    space.vec(kW) = {1, 1};
    FailingObjective objective(&space, fail_on);
    LbfgsOptions options;
    options.memory = 2;
    LbfgsDriver driver(options, &space, &objective);
    absl::StatusOr<LbfgsResult> r = driver.Run(nullptr);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << fail_on;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("worker 3"));
  }
}

TEST(LbfgsDriverTest, BadOptionsAndNonFiniteStartAreRefused) {
  MemoryVectorSpace space(2, 2);
  FunctionObjective objective(&space, Quadratic);
  auto run = [&](LbfgsOptions o) { return LbfgsDriver(o, &space, &objective).Run(nullptr); };
  LbfgsOptions o;
  o.memory = 0;
  EXPECT_THAT(std::string(run(o).status().message()), HasSubstr("memory"));
  o = LbfgsOptions();
  o.c1 = 0.95;
  EXPECT_EQ(run(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = LbfgsOptions();
  o.max_line_search = 0;
  EXPECT_THAT(std::string(run(o).status().message()), HasSubstr("max_line_search"));
  EXPECT_EQ(objective.calls(), 0) << "options are checked before any evaluation";

  space.vec(kW) = {NAN, 0};
  o = LbfgsOptions();
  o.memory = 2;
  absl::StatusOr<LbfgsResult> r = run(o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("finite"));
}

TEST(LbfgsDriverTest, StopsOnFtolAndOnMaxIterations) {
  for (const std::string reason : {"ftol", "max_iterations"}) {
    MemoryVectorSpace space(5, 10);
    space.vec(kW) = RosenbrockStart(10);
    FunctionObjective objective(&space, Rosenbrock);
    LbfgsOptions options;
    options.memory = 5;
    options.gtol = 0;
    options.ftol = reason == "ftol" ? 1e-3 : 0;
    options.max_iterations = 7;
    LbfgsDriver driver(options, &space, &objective);
    double previous = 0;
    double decrease = 0;
    absl::StatusOr<LbfgsResult> r = driver.Run([&](const IterationReport& report) {
      if (report.iteration > 1) {
        decrease = (previous - report.f) / std::max({std::abs(previous), std::abs(report.f), 1.0});
      }
      previous = report.f;
    });
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->stop_reason, reason);
    if (reason == "ftol") {
      EXPECT_LT(r->iterations, 7);
      EXPECT_LE(decrease, 1e-3);
    } else {
      EXPECT_EQ(r->iterations, 7);
    }
    EXPECT_EQ(space.vec(kW), space.vec(kX));
  }
}

}  // namespace
}  // namespace lbfgs
}  // namespace ps
