#include "worker/lbfgs/lbfgs_driver.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ps {
namespace lbfgs {
namespace {

// The pair (s, y) is stored only when s . y > kCurvature * y . y.
constexpr double kCurvature = 1e-10;

bool Finite(double v) { return std::isfinite(v); }

// Minimizer of the cubic through (a, fa) and (b, fb) with slopes ga, gb (Nocedal & Wright
// eq. 3.59); NaN when the cubic has none.
double CubicMinimizer(double a, double fa, double ga, double b, double fb, double gb) {
  const double d1 = ga + gb - 3 * (fa - fb) / (a - b);
  const double disc = d1 * d1 - ga * gb;
  if (!(disc >= 0)) return NAN;
  const double d2 = std::copysign(std::sqrt(disc), b - a);
  const double denom = gb - ga + 2 * d2;
  if (denom == 0) return NAN;
  return b - (b - a) * (gb + d2 - d1) / denom;
}

}  // namespace

LbfgsDriver::LbfgsDriver(const LbfgsOptions& options, VectorSpace* space, Objective* objective)
    : options_(options),
      m_(std::max(options.memory, 1)),
      space_(space),
      objective_(objective),
      rho_(m_, 0.0),
      yy_(m_, 0.0) {}

absl::Status LbfgsDriver::ValidateOptions() const {
  const LbfgsOptions& o = options_;
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("LbfgsOptions: ", what));
  };
  if (o.memory < 1) return bad(absl::StrCat("memory is ", o.memory, "; it must be >= 1"));
  if (o.max_iterations < 0) return bad(absl::StrCat("max_iterations is ", o.max_iterations));
  if (o.max_line_search < 1) return bad(absl::StrCat("max_line_search is ", o.max_line_search));
  if (!(o.gtol >= 0)) return bad(absl::StrCat("gtol is ", o.gtol, "; it must be >= 0"));
  if (!(o.ftol >= 0)) return bad(absl::StrCat("ftol is ", o.ftol, "; it must be >= 0"));
  if (!(0 < o.c1 && o.c1 < o.c2 && o.c2 < 1)) {
    return bad(absl::StrCat("c1 = ", o.c1, ", c2 = ", o.c2, "; need 0 < c1 < c2 < 1"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> LbfgsDriver::Round(const std::vector<VecOp>& ops) {
  ++rounds_;
  return space_->Run(ops);
}

absl::StatusOr<LbfgsResult> LbfgsDriver::Run(
    const std::function<void(const IterationReport&)>& progress) {
  if (absl::Status s = ValidateOptions(); !s.ok()) return s;
  evaluations_ = 0;
  count_ = 0;
  next_slot_ = 0;

  absl::StatusOr<double> f0 = objective_->Evaluate();
  if (!f0.ok()) return f0.status();
  ++evaluations_;
  absl::StatusOr<std::vector<double>> dots =
      Round({CopyOp(kX, kW), CopyOp(kGk, kG), DotOp(kGk, kGk)});
  if (!dots.ok()) return dots.status();
  double f = *f0;
  double grad_norm = std::sqrt((*dots)[0]);
  if (!Finite(f) || !Finite(grad_norm)) {
    return absl::InvalidArgumentError(
        absl::StrCat("L-BFGS start: f = ", f, " and ||g|| = ", grad_norm,
                     " at the initial point; both must be finite (check the table's initial "
                     "values and the objective)"));
  }

  LbfgsResult result{f, grad_norm, 0, evaluations_, ""};
  if (grad_norm <= options_.gtol) {
    result.stop_reason = "gtol";
    return result;
  }
  if (options_.max_iterations == 0) {
    result.stop_reason = "max_iterations";
    return result;
  }
  while (true) {
    double alpha0 = count_ == 0 ? 1 / grad_norm : 1.0;
    absl::StatusOr<double> dphi0 = Direction(alpha0);
    if (!dphi0.ok()) return dphi0.status();
    if (!(*dphi0 < 0) && count_ > 0) {
      // Not a descent direction (the pairs no longer describe f): start over from -g.
      count_ = 0;
      alpha0 = 1 / grad_norm;
      dphi0 = Direction(alpha0);
      if (!dphi0.ok()) return dphi0.status();
    }
    absl::StatusOr<LineSearchResult> ls;
    if (*dphi0 < 0) {
      ls = LineSearch(f, *dphi0, alpha0);
      if (!ls.ok()) return ls.status();
    } else {
      ls = LineSearchResult{false, 0, {}};  // -g is not downhill: g is at rounding level
    }
    if (!ls->found) {
      // Back to the last accepted iterate, with its gradient.
      absl::StatusOr<std::vector<double>> reset = Round({CopyOp(kW, kX), CopyOp(kG, kGk)});
      if (!reset.ok()) return reset.status();
      result.stop_reason = "line_search";
      break;
    }
    absl::StatusOr<double> gg = Accept();
    if (!gg.ok()) return gg.status();
    const double f_new = ls->at.phi;
    const double decrease = (f - f_new) / std::max({std::abs(f), std::abs(f_new), 1.0});
    f = f_new;
    grad_norm = std::sqrt(*gg);
    ++result.iterations;
    result.f = f;
    result.grad_norm = grad_norm;
    result.evaluations = evaluations_;
    if (progress) {
      progress(IterationReport{result.iterations, f, grad_norm, ls->alpha, evaluations_});
    }
    if (grad_norm <= options_.gtol) {
      result.stop_reason = "gtol";
      break;
    }
    if (decrease <= options_.ftol) {
      result.stop_reason = "ftol";
      break;
    }
    if (result.iterations >= options_.max_iterations) {
      result.stop_reason = "max_iterations";
      break;
    }
  }
  result.evaluations = evaluations_;
  return result;
}

absl::StatusOr<double> LbfgsDriver::Direction(double alpha0) {
  const int h = count_;
  // The last round also negates q into d, takes phi'(0) and places the first trial point.
  const std::vector<VecOp> tail = {ScaleOp(kD, -1), DotOp(kGk, kD), CopyOp(kW, kX),
                                   AxpyOp(kW, kD, alpha0)};
  auto round = [this](std::vector<VecOp> ops) -> absl::StatusOr<double> {
    absl::StatusOr<std::vector<double>> dots = Round(ops);
    if (!dots.ok()) return dots.status();
    return dots->back();
  };
  auto with_tail = [&tail](std::vector<VecOp> ops) {
    ops.insert(ops.end(), tail.begin(), tail.end());
    return ops;
  };
  if (h == 0) return round(with_tail({CopyOp(kD, kGk)}));

  // First loop, newest to oldest: a_k = rho_k s_k . q; q -= a_k y_k. Each round subtracts one
  // pair and takes the dot product the next needs.
  std::vector<double> a(h);
  absl::StatusOr<double> dot = round({CopyOp(kD, kGk), DotOp(S(Slot(h - 1)), kD)});
  for (int k = h - 1; k >= 0; --k) {
    if (!dot.ok()) return dot.status();
    a[k] = rho_[Slot(k)] * *dot;
    std::vector<VecOp> ops = {AxpyOp(kD, Y(Slot(k), m_), -a[k])};
    if (k > 0) {
      ops.push_back(DotOp(S(Slot(k - 1)), kD));
    } else {
      // q *= gamma = s . y / y . y of the newest pair, then the second loop's first dot.
      const int newest = Slot(h - 1);
      ops.push_back(ScaleOp(kD, 1 / (rho_[newest] * yy_[newest])));
      ops.push_back(DotOp(Y(Slot(0), m_), kD));
    }
    dot = round(std::move(ops));
  }
  // Second loop, oldest to newest: b = rho_k y_k . q; q += (a_k - b) s_k.
  for (int k = 0; k < h; ++k) {
    if (!dot.ok()) return dot.status();
    const double b = rho_[Slot(k)] * *dot;
    std::vector<VecOp> ops = {AxpyOp(kD, S(Slot(k)), a[k] - b)};
    if (k < h - 1) {
      ops.push_back(DotOp(Y(Slot(k + 1), m_), kD));
    } else {
      ops = with_tail(std::move(ops));
    }
    dot = round(std::move(ops));
  }
  return dot;
}

absl::StatusOr<LbfgsDriver::Trial> LbfgsDriver::Evaluate(double alpha, bool positioned) {
  if (!positioned) {
    absl::StatusOr<std::vector<double>> moved = Round({CopyOp(kW, kX), AxpyOp(kW, kD, alpha)});
    if (!moved.ok()) return moved.status();
  }
  absl::StatusOr<double> phi = objective_->Evaluate();
  if (!phi.ok()) return phi.status();
  ++evaluations_;
  absl::StatusOr<std::vector<double>> dots = Round({DotOp(kG, kD)});
  if (!dots.ok()) return dots.status();
  return Trial{*phi, (*dots)[0]};
}

absl::StatusOr<LbfgsDriver::LineSearchResult> LbfgsDriver::LineSearch(double phi0, double dphi0,
                                                                      double alpha0) {
  const double c1 = options_.c1, c2 = options_.c2;
  int evaluations = 0;
  double prev = 0;
  Trial at_prev{phi0, dphi0};
  double alpha = alpha0;
  while (evaluations < options_.max_line_search) {
    absl::StatusOr<Trial> at = Evaluate(alpha, /*positioned=*/evaluations == 0);
    if (!at.ok()) return at.status();
    ++evaluations;
    if (!Finite(at->phi) || !Finite(at->dphi) || at->phi > phi0 + c1 * alpha * dphi0 ||
        (evaluations > 1 && at->phi >= at_prev.phi)) {
      return Zoom(phi0, dphi0, prev, at_prev, alpha, *at, &evaluations);
    }
    if (std::abs(at->dphi) <= -c2 * dphi0) return LineSearchResult{true, alpha, *at};
    if (at->dphi >= 0) return Zoom(phi0, dphi0, alpha, *at, prev, at_prev, &evaluations);
    // Still going down steeply: extrapolate, to the cubic's minimizer kept within
    // [1.1, 4] times the last increment beyond alpha.
    const double lo = alpha + 1.1 * (alpha - prev), hi = alpha + 4 * (alpha - prev);
    double next = CubicMinimizer(prev, at_prev.phi, at_prev.dphi, alpha, at->phi, at->dphi);
    next = Finite(next) ? std::clamp(next, lo, hi) : hi;
    prev = alpha;
    at_prev = *at;
    alpha = next;
  }
  return LineSearchResult{false, 0, {}};
}

absl::StatusOr<LbfgsDriver::LineSearchResult> LbfgsDriver::Zoom(double phi0, double dphi0,
                                                                double lo, Trial at_lo, double hi,
                                                                Trial at_hi, int* evaluations) {
  const double c1 = options_.c1, c2 = options_.c2;
  while (*evaluations < options_.max_line_search) {
    const double left = std::min(lo, hi), right = std::max(lo, hi);
    const double margin = 0.1 * (right - left);
    if (!(right - left > 1e-15 * right)) break;  // the interval is at rounding level
    // Safeguarded interpolation: cubic, else quadratic (phi and phi' at lo, phi at hi), else
    // bisection; a point too near either end is refused.
    auto inside = [&](double t) { return Finite(t) && t >= left + margin && t <= right - margin; };
    double alpha = CubicMinimizer(lo, at_lo.phi, at_lo.dphi, hi, at_hi.phi, at_hi.dphi);
    if (!inside(alpha)) {
      const double w = hi - lo;
      const double c = (at_hi.phi - at_lo.phi - at_lo.dphi * w) / (w * w);
      alpha = c > 0 ? lo - at_lo.dphi / (2 * c) : NAN;
      if (!inside(alpha)) alpha = left + 0.5 * (right - left);
    }
    absl::StatusOr<Trial> at = Evaluate(alpha, /*positioned=*/false);
    if (!at.ok()) return at.status();
    ++*evaluations;
    if (!Finite(at->phi) || !Finite(at->dphi) || at->phi > phi0 + c1 * alpha * dphi0 ||
        at->phi >= at_lo.phi) {
      hi = alpha;
      at_hi = *at;
      continue;
    }
    if (std::abs(at->dphi) <= -c2 * dphi0) return LineSearchResult{true, alpha, *at};
    if (at->dphi * (hi - lo) >= 0) {
      hi = lo;
      at_hi = at_lo;
    }
    lo = alpha;
    at_lo = *at;
  }
  return LineSearchResult{false, 0, {}};
}

absl::StatusOr<double> LbfgsDriver::Accept() {
  const int j = next_slot_;
  const int s = S(j), y = Y(j, m_);
  absl::StatusOr<std::vector<double>> dots = Round({
      CopyOp(s, kW),
      AxpyOp(s, kX, -1),  // s = W - X
      CopyOp(y, kG),
      AxpyOp(y, kGk, -1),  // y = G - Gk
      DotOp(s, y),
      DotOp(y, y),  //
      CopyOp(kX, kW),
      CopyOp(kGk, kG),
      DotOp(kGk, kGk),
  });
  if (!dots.ok()) return dots.status();
  const double sy = (*dots)[0], yy = (*dots)[1];
  if (Finite(sy) && Finite(yy) && sy > kCurvature * yy) {
    rho_[j] = 1 / sy;
    yy_[j] = yy;
    next_slot_ = (j + 1) % m_;
    count_ = std::min(count_ + 1, m_);
  } else if (count_ == m_) {
    --count_;  // slot j held the oldest pair, now overwritten by the refused one
  }
  return (*dots)[2];
}

}  // namespace lbfgs
}  // namespace ps
