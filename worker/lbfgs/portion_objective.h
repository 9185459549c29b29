// PortionObjective: the function the coordinator's L-BFGS driver minimizes,
// evaluated by the workers: the mean logistic loss over the data plus
// l2/2 ||w||^2 (lr_portions.h), at the point in the table's values. Each
// Evaluate zeroes the servers' gradient accumulator, hands the data portions
// out through the scheduler, waits for all (the workers push each portion's
// gradient sum to the accumulator, exactly once per portion), then divides
// by the example count and adds the l2 term on the servers. Not
// thread-safe (the driver's thread); space and scheduler are not owned.
#ifndef PS_WORKER_LBFGS_PORTION_OBJECTIVE_H_
#define PS_WORKER_LBFGS_PORTION_OBJECTIVE_H_

#include <cstdint>

#include "absl/time/time.h"
#include "worker/lbfgs/portion_scheduler.h"
#include "worker/lbfgs/server_vector_space.h"
#include "worker/lbfgs/vector_space.h"

namespace ps::lbfgs {

struct PortionObjectiveOptions {
  int num_portions = 16;
  double l2 = 0;
  // An evaluation whose portions are not all done by then fails the job.
  absl::Duration evaluation_timeout = absl::Minutes(10);
};

// The request id of the first part of portion p's gradient push in
// evaluation e (its other parts follow): disjoint for every (e, p), growing
// with e (servers forget ids in arrival order, refusing older ones).
inline uint64_t PortionRequestId(uint64_t evaluation, int portion) {
  return (evaluation << 34) | (static_cast<uint64_t>(portion) << 12) | 1;
}
// Evaluations and portions PortionRequestId can number.
inline constexpr uint64_t kMaxEvaluations = uint64_t{1} << 29;
inline constexpr int kMaxPortions = 1 << 22;

class PortionObjective final : public Objective {
 public:
  PortionObjective(const PortionObjectiveOptions& options, ServerVectorSpace* space,
                   PortionScheduler* scheduler);

  // f at the values; the accumulator (kG) then holds its gradient. Errors:
  // the scheduler's (DEADLINE_EXCEEDED naming the portions left), the
  // servers', FAILED_PRECONDITION when the portions held no example or past
  // kMaxEvaluations.
  absl::StatusOr<double> Evaluate() override;

  uint64_t evaluation() const { return evaluation_; }  // evaluations begun
  double data_loss() const { return data_loss_; }      // mean logistic loss of the last
  uint64_t examples() const { return examples_; }      // examples of the last
  int backups() const { return backups_; }             // backup copies, whole job
  int duplicates() const { return duplicates_; }       // duplicate results, whole job

 private:
  const PortionObjectiveOptions options_;
  ServerVectorSpace* const space_;
  PortionScheduler* const scheduler_;
  uint64_t evaluation_ = 0;
  double data_loss_ = 0;
  uint64_t examples_ = 0;
  int backups_ = 0;
  int duplicates_ = 0;
};

}  // namespace ps::lbfgs

#endif  // PS_WORKER_LBFGS_PORTION_OBJECTIVE_H_
