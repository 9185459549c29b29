// EtcdContact: when this server last had an answer from etcd. Any answer
// counts (a lease found expired is an answer; a refused connection or a
// timeout is not). A server whose lease renewal is overdue asks the other
// servers of its ring for theirs, to tell an etcd outage (nobody reaches
// etcd: serving on with the last ring is safe, since nobody can change it)
// from being cut off itself (server/membership_agent.h). Thread-safe.
#ifndef PS_SERVER_REPLICATION_ETCD_CONTACT_H_
#define PS_SERVER_REPLICATION_ETCD_CONTACT_H_

#include <algorithm>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace ps {

class EtcdContact {
 public:
  explicit EtcdContact(Clock* clock = Clock::Real()) : clock_(clock) {}

  // A call sent at `sent` ended with `status`: an answer unless etcd could
  // not be reached (UNAVAILABLE, DEADLINE_EXCEEDED).
  void Note(absl::Time sent, const absl::Status& status) {
    const bool answered = !absl::IsUnavailable(status) && !absl::IsDeadlineExceeded(status);
    absl::MutexLock lock(&mu_);
    last_call_answered_ = answered;
    if (answered) last_answer_ = std::max(last_answer_, sent);
  }
  // Whether the call that ended last got an answer (false before any).
  bool LastCallAnswered() const {
    absl::MutexLock lock(&mu_);
    return last_call_answered_;
  }
  // Since the last answer; InfiniteDuration before the first.
  absl::Duration SinceAnswer() const {
    absl::MutexLock lock(&mu_);
    return last_answer_ == absl::InfinitePast() ? absl::InfiniteDuration()
                                                : clock_->Now() - last_answer_;
  }

 private:
  Clock* const clock_;
  mutable absl::Mutex mu_;
  bool last_call_answered_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_answer_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace ps

#endif  // PS_SERVER_REPLICATION_ETCD_CONTACT_H_
