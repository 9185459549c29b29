// PortionScheduler: hands out the data portions of one objective evaluation to workers as
// they ask (fast workers take more), and near the end hands an outstanding portion to a second
// worker as a backup; the first result of a portion is kept and duplicates are dropped.
//
// Time (how long a portion has run, every wait) comes from the injected Clock, which is not
// owned and must outlive the scheduler. Thread-safe: every method may be called from any thread.
#ifndef PS_WORKER_LBFGS_PORTION_SCHEDULER_H_
#define PS_WORKER_LBFGS_PORTION_SCHEDULER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace ps {
namespace lbfgs {

struct SchedulerOptions {
  // A running portion gets a backup copy once it has run this long (and no portion is left
  // unassigned).
  absl::Duration backup_after = absl::Milliseconds(200);
  // Copies of one portion that may run at once, the first included.
  int max_copies = 2;
};

class PortionScheduler {
 public:
  PortionScheduler(const SchedulerOptions& options, Clock* clock);

  // Starts evaluation `evaluation` (> any earlier) of num_portions (>= 0) portions; the earlier
  // one's outstanding portions are abandoned (their results dropped from now on) and its
  // totals reset. Wakes waiting Next and AwaitDone calls. Errors: INVALID_ARGUMENT when
  // `evaluation` is not above the last one begun or num_portions < 0 (nothing changes).
  absl::Status Begin(uint64_t evaluation, int num_portions);

  struct Task {
    uint64_t evaluation;
    int portion;
    bool backup;  // another copy of this portion is running
  };
  // A task for `worker`, waiting up to `wait` on the clock for one: the lowest unassigned
  // portion; else a backup copy of the outstanding portion started longest ago (by its
  // oldest running copy) that has run for at least backup_after, has fewer than max_copies
  // copies running and is not already run by this worker. nullopt when none within `wait` or
  // after Stop().
  std::optional<Task> Next(uint32_t worker, absl::Duration wait);

  // A worker's result. Returns true when it is the portion's first (kept: its loss and
  // example count are added), false for a duplicate (counted in duplicates_dropped) or a
  // result of another evaluation or an unknown portion (dropped). A first result is kept
  // whoever sends it, also a worker whose copy was Failed.
  bool Finish(uint32_t worker, uint64_t evaluation, int portion, double loss, uint64_t examples);

  // The worker could not finish the task (or died: call it with the worker's every running
  // task): the copy stops counting; a portion with no copy left is unassigned again (and
  // handed out first, lowest first). Ignored for a finished portion, another evaluation or a
  // copy the worker does not run.
  void Fail(uint32_t worker, uint64_t evaluation, int portion);

  // Waits until every portion of the current evaluation is finished, up to timeout on the
  // clock: OK, or DEADLINE_EXCEEDED naming the evaluation, portions left and which workers run
  // them. Also FAILED_PRECONDITION before any Begin, ABORTED when a Begin abandons the awaited
  // evaluation, CANCELLED after Stop() with portions left.
  absl::Status AwaitDone(absl::Duration timeout);

  struct Totals {
    double loss;
    uint64_t examples;
    int backups_started;
    int duplicates_dropped;
  };
  Totals totals() const;                             // of the current evaluation
  std::map<uint32_t, int> PortionsByWorker() const;  // portions kept, whole job

  void Stop();  // wakes every Next, which returns nullopt from now on

 private:
  struct Portion {
    bool done = false;
    std::vector<std::pair<uint32_t, absl::Time>> copies;  // running: (worker, started)
  };

  // The task Next would hand out now, recorded as handed out; nullopt when none. *wake_at is
  // set to when the earliest backup could become due for this worker (InfiniteFuture if none).
  std::optional<Task> PickLocked(uint32_t worker, absl::Time now, absl::Time* wake_at)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllDoneLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // "portion 3 (running on workers 1, 4), portion 8 (unassigned)".
  std::string DescribeLeftLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const SchedulerOptions options_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // Bumped by every change a waiter may be waiting for (Begin, Finish, Fail, Stop).
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  // The current evaluation.
  bool begun_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t evaluation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Portion> portions_ ABSL_GUARDED_BY(mu_);
  std::set<int> unassigned_ ABSL_GUARDED_BY(mu_);
  int left_ ABSL_GUARDED_BY(mu_) = 0;  // portions not done
  Totals totals_ ABSL_GUARDED_BY(mu_) = {0, 0, 0, 0};
  // The whole job.
  std::map<uint32_t, int> kept_by_worker_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lbfgs
}  // namespace ps

#endif  // PS_WORKER_LBFGS_PORTION_SCHEDULER_H_
