#include "worker/client/timer.h"

#include <algorithm>

namespace ps {

Timer::~Timer() {
  std::thread thread;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    thread.swap(thread_);
  }
  if (thread.joinable()) thread.join();
  // Nothing is left to wait for: run what is pending now.
  std::map<std::pair<absl::Time, uint64_t>, std::function<void()>> rest;
  {
    absl::MutexLock lock(&mu_);
    rest.swap(due_);
  }
  for (auto& [when, f] : rest) f();
}

void Timer::RunAfter(absl::Duration delay, std::function<void()> f) {
  const absl::Time when = clock_->Now() + std::max(delay, absl::ZeroDuration());
  absl::MutexLock lock(&mu_);
  if (stop_) {
    // Being destroyed: the destructor runs it with the rest.
    due_.emplace(std::make_pair(when, next_seq_++), std::move(f));
    return;
  }
  if (due_.empty() || when < due_.begin()->first.first) changed_ = true;
  due_.emplace(std::make_pair(when, next_seq_++), std::move(f));
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void Timer::Loop() {
  mu_.Lock();
  auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || changed_; };
  while (!stop_) {
    changed_ = false;
    if (due_.empty()) {
      mu_.Await(absl::Condition(&woken));
      continue;
    }
    const absl::Duration wait = due_.begin()->first.first - clock_->Now();
    if (wait > absl::ZeroDuration()) {
      clock_->AwaitWithTimeout(&mu_, absl::Condition(&woken), wait);
      continue;
    }
    std::function<void()> f = std::move(due_.begin()->second);
    due_.erase(due_.begin());
    mu_.Unlock();
    f();
    mu_.Lock();
  }
  mu_.Unlock();
}

}  // namespace ps
