// Clock: the time source of everything that waits, retries or expires
// (server leases and parked calls, de-duplication retention, client retries
// and heartbeats), injected so that tests control time.
//
// RealClock reads absl::Now(). FakeClock only moves when a test calls
// Advance(); its waits return when fake time passes their deadline or their
// condition holds. Both are thread-safe.
#ifndef PS_COMMON_CLOCK_H_
#define PS_COMMON_CLOCK_H_

#include <chrono>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ps {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;
  // With *mu held: waits until `cond` holds or `timeout` has passed on this
  // clock; returns whether `cond` holds. *mu is held again on return.
  virtual bool AwaitWithTimeout(absl::Mutex* mu, const absl::Condition& cond,
                                absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;
  // Sleeps for `d` on this clock.
  virtual void SleepFor(absl::Duration d) = 0;

  // The process-wide real clock (never deleted).
  static Clock* Real();
  // The real clock, but monotonic: the wall clock at the first call plus
  // the steady clock's time since (a step of the wall clock, by NTP or an
  // operator, does not move it). For durations that decide safety, such as
  // a lease's fence. Never deleted.
  static Clock* Monotonic();
};

class RealClock final : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
  bool AwaitWithTimeout(absl::Mutex* mu, const absl::Condition& cond,
                        absl::Duration timeout) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return mu->AwaitWithTimeout(cond, timeout);
  }
  void SleepFor(absl::Duration d) override { absl::SleepFor(d); }
};

// Time stands still until Advance(). Waiters poll the fake time every
// millisecond of real time (test-only; cheap).
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'000'000'000)) : now_(start) {}

  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  bool AwaitWithTimeout(absl::Mutex* mu, const absl::Condition& cond,
                        absl::Duration timeout) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const absl::Time deadline = Now() + timeout;
    while (!cond.Eval()) {
      if (Now() >= deadline) return false;
      mu->AwaitWithTimeout(cond, absl::Milliseconds(1));
    }
    return true;
  }
  void SleepFor(absl::Duration d) override {
    const absl::Time deadline = Now() + d;
    absl::MutexLock lock(&mu_);
    auto passed = [this, deadline]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return now_ >= deadline; };
    mu_.Await(absl::Condition(&passed));
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

class MonotonicClock final : public Clock {
 public:
  MonotonicClock() : anchor_(absl::Now()), start_(std::chrono::steady_clock::now()) {}
  absl::Time Now() override {
    return anchor_ + absl::FromChrono(std::chrono::steady_clock::now() - start_);
  }
  bool AwaitWithTimeout(absl::Mutex* mu, const absl::Condition& cond,
                        absl::Duration timeout) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return mu->AwaitWithTimeout(cond, timeout);  // absl waits on a steady clock
  }
  void SleepFor(absl::Duration d) override { absl::SleepFor(d); }

 private:
  const absl::Time anchor_;
  const std::chrono::steady_clock::time_point start_;
};

inline Clock* Clock::Monotonic() {
  static MonotonicClock* const clock = new MonotonicClock();
  return clock;
}

inline Clock* Clock::Real() {
  static RealClock* const clock = new RealClock();
  return clock;
}

}  // namespace ps

#endif  // PS_COMMON_CLOCK_H_
