// Timer: runs closures at times of a Clock, in order, on one thread of its
// own (started at the first RunAfter). PsClient's asynchronous calls wait
// out their retry backoff here instead of in a caller's thread.
//
// Closures must not block for long: they delay the ones after them. The
// destructor runs whatever is still pending at once, then joins the thread,
// so nothing that waits on a closure waits forever. Thread-safe.
#ifndef PS_WORKER_CLIENT_TIMER_H_
#define PS_WORKER_CLIENT_TIMER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace ps {

class Timer {
 public:
  explicit Timer(Clock* clock) : clock_(clock) {}
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Runs `f` once `delay` has passed on the clock (at once for a delay <= 0,
  // still on the timer's thread). Closures due at the same time run in the
  // order they were added.
  void RunAfter(absl::Duration delay, std::function<void()> f);

 private:
  void Loop();

  Clock* const clock_;
  absl::Mutex mu_;
  // Keyed by (due time, sequence number).
  std::map<std::pair<absl::Time, uint64_t>, std::function<void()>> due_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool changed_ ABSL_GUARDED_BY(mu_) = false;  // an earlier closure was added
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_WORKER_CLIENT_TIMER_H_
