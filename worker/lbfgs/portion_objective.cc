#include "worker/lbfgs/portion_objective.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace ps::lbfgs {

PortionObjective::PortionObjective(const PortionObjectiveOptions& options, ServerVectorSpace* space,
                                   PortionScheduler* scheduler)
    : options_(options), space_(space), scheduler_(scheduler) {}

absl::StatusOr<double> PortionObjective::Evaluate() {
  if (evaluation_ + 1 >= kMaxEvaluations) {
    return absl::FailedPreconditionError(
        absl::StrCat("L-BFGS: ", evaluation_, " evaluations, the most one job can number"));
  }
  ++evaluation_;
  space_->set_clock(evaluation_);
  if (absl::StatusOr<std::vector<double>> zero = space_->Run({ScaleOp(kG, 0)}); !zero.ok()) {
    return zero.status();
  }
  if (absl::Status s = scheduler_->Begin(evaluation_, options_.num_portions); !s.ok()) return s;
  if (absl::Status s = scheduler_->AwaitDone(options_.evaluation_timeout); !s.ok()) return s;
  const PortionScheduler::Totals totals = scheduler_->totals();
  backups_ += totals.backups_started;
  duplicates_ += totals.duplicates_dropped;
  if (totals.examples == 0) {
    return absl::FailedPreconditionError(absl::StrCat("L-BFGS evaluation ", evaluation_, ": the ",
                                                      options_.num_portions,
                                                      " portions held no example"));
  }
  examples_ = totals.examples;
  data_loss_ = totals.loss / static_cast<double>(totals.examples);
  absl::StatusOr<std::vector<double>> ww =
      space_->Run({ScaleOp(kG, 1.0 / static_cast<double>(totals.examples)),
                   AxpyOp(kG, kW, options_.l2), DotOp(kW, kW)});
  if (!ww.ok()) return ww.status();
  return data_loss_ + 0.5 * options_.l2 * (*ww)[0];
}

}  // namespace ps::lbfgs
