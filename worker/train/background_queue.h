// BackgroundQueue: runs submitted tasks one at a time, in order, on its own
// thread, so a worker can compute while its pushes and pulls are in flight.
//
// The first error a task returns is kept; later tasks still run (they are
// the caller's to make safe) and Wait* returns that error. The destructor
// waits for every task. Thread-safe, but meant for one producer.
#ifndef PS_WORKER_TRAIN_BACKGROUND_QUEUE_H_
#define PS_WORKER_TRAIN_BACKGROUND_QUEUE_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace ps {

class BackgroundQueue {
 public:
  BackgroundQueue();
  ~BackgroundQueue();

  void Submit(std::function<absl::Status()> task);

  // Blocks until at most `n` submitted tasks are unfinished; returns the
  // first error any task has returned so far.
  absl::Status WaitUntilPending(int n);

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<absl::Status()>> tasks_ ABSL_GUARDED_BY(mu_);
  int unfinished_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts after the fields it uses
};

}  // namespace ps

#endif  // PS_WORKER_TRAIN_BACKGROUND_QUEUE_H_
