// ProgressReporter: sends a worker's progress points (to the servers, for
// their web UI and Stats) off the training thread. At most one report is in
// flight and one waits; a newer point replaces the waiting one. So a slow or
// unreachable server never holds a training step up (a report to every
// server may take its deadline), the servers get the newest figures as fast
// as they take them, and the last point is always sent: the destructor waits
// for it. A failed report is said once on stderr and does not stop training.
//
// Thread-safe. `send` must stay callable until the destructor returns.
#ifndef PS_WORKER_TRAIN_PROGRESS_REPORTER_H_
#define PS_WORKER_TRAIN_PROGRESS_REPORTER_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "worker/train/background_queue.h"
#include "worker/train/progress.h"

namespace ps {

class ProgressReporter {
 public:
  using Send = std::function<absl::Status(const ProgressPoint&)>;
  explicit ProgressReporter(Send send) : send_(std::move(send)) {}

  // Returns at once: the point is sent, or replaces a waiting one.
  void Add(const ProgressPoint& point);

  // Points sent, and points replaced before they were sent.
  int64_t sent() const;
  int64_t replaced() const;

 private:
  void SendLatest();

  const Send send_;
  mutable absl::Mutex mu_;
  std::optional<ProgressPoint> waiting_ ABSL_GUARDED_BY(mu_);
  int64_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t replaced_ ABSL_GUARDED_BY(mu_) = 0;
  bool warned_ = false;    // the queue's thread only
  BackgroundQueue queue_;  // last: its destructor sends what waits
};

}  // namespace ps

#endif  // PS_WORKER_TRAIN_PROGRESS_REPORTER_H_
