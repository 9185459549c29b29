// ProgressReporter with a sender the test holds up (a server that does not
// answer): Add never waits for it, waiting points are replaced by newer
// ones, and the last point is sent before the reporter is gone.
#include "worker/train/progress_reporter.h"

#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

ProgressPoint Step(int64_t step) {
  ProgressPoint p;
  p.step = step;
  return p;
}

// Sends by recording the step; holds every send until Release().
class HeldSender {
 public:
  absl::Status Send(const ProgressPoint& p) {
    absl::MutexLock lock(&mu_);
    started_.push_back(p.step);
    auto released = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return released_; };
    mu_.Await(absl::Condition(&released));
    return failing_ ? absl::UnavailableError("server 1 does not answer") : absl::OkStatus();
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }
  void Fail() {
    absl::MutexLock lock(&mu_);
    failing_ = true;
  }
  // Blocks until `n` sends have started.
  void AwaitStarted(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return started_.size() >= n; };
    mu_.Await(absl::Condition(&enough));
  }
  std::vector<int64_t> started() {
    absl::MutexLock lock(&mu_);
    return started_;
  }

 private:
  absl::Mutex mu_;
  std::vector<int64_t> started_ ABSL_GUARDED_BY(mu_);
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  bool failing_ ABSL_GUARDED_BY(mu_) = false;
};

TEST(ProgressReporterTest, AddNeverWaitsAndTheNewestPointIsSentLast) {
  HeldSender sender;
  {
    ProgressReporter reporter([&](const ProgressPoint& p) { return sender.Send(p); });
    reporter.Add(Step(1));
    sender.AwaitStarted(1);  // step 1 in flight, held
    // While it is held, 100 more points: none of these calls may wait for
    // the send (they would never return: the sender is released after).
    for (int64_t step = 2; step <= 101; ++step) reporter.Add(Step(step));
    EXPECT_EQ(reporter.replaced(), 99);  // 2..100 replaced in turn by the next
    EXPECT_EQ(reporter.sent(), 0);
    sender.Release();
  }  // the destructor sends what waits
  EXPECT_EQ(sender.started(), (std::vector<int64_t>{1, 101}));
}

TEST(ProgressReporterTest, AFailedSendDoesNotStopTheNextOnes) {
  HeldSender sender;
  sender.Fail();
  sender.Release();
  ProgressReporter reporter([&](const ProgressPoint& p) { return sender.Send(p); });
  reporter.Add(Step(1));
  sender.AwaitStarted(1);
  reporter.Add(Step(2));
  sender.AwaitStarted(2);
  EXPECT_EQ(sender.started(), (std::vector<int64_t>{1, 2}));
}

}  // namespace
}  // namespace ps
