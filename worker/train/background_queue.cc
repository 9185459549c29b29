#include "worker/train/background_queue.h"

namespace ps {

BackgroundQueue::BackgroundQueue() : thread_([this] { Loop(); }) {}

BackgroundQueue::~BackgroundQueue() {
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* n) { return *n == 0; }, &unfinished_));
    stopping_ = true;
  }
  thread_.join();
}

void BackgroundQueue::Submit(std::function<absl::Status()> task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
  ++unfinished_;
}

absl::Status BackgroundQueue::WaitUntilPending(int n) {
  absl::MutexLock lock(&mu_);
  auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return unfinished_ <= n; };
  mu_.Await(absl::Condition(&done));
  return first_error_;
}

void BackgroundQueue::Loop() {
  while (true) {
    std::function<absl::Status()> task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !tasks_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (tasks_.empty()) return;  // stopping, nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    absl::Status status = task();
    absl::MutexLock lock(&mu_);
    if (!status.ok() && first_error_.ok()) first_error_ = status;
    --unfinished_;
  }
}

}  // namespace ps
