#include "worker/client/timer.h"

#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(TimerTest, RunsClosuresInOrderOfDueTimeOnlyOnceTheClockPassesThem) {
  FakeClock clock;
  Timer timer(&clock);
  absl::Mutex mu;
  std::vector<int> ran;
  auto add = [&](int id) {
    return [&, id] {
      absl::MutexLock lock(&mu);
      ran.push_back(id);
    };
  };
  auto count = [&] {
    absl::MutexLock lock(&mu);
    return ran.size();
  };
  timer.RunAfter(absl::Seconds(30), add(3));
  timer.RunAfter(absl::Seconds(10), add(1));
  timer.RunAfter(absl::Seconds(10), add(2));  // same time: after 1
  absl::Notification now;
  timer.RunAfter(absl::ZeroDuration(), [&] { now.Notify(); });
  now.WaitForNotification();
  EXPECT_EQ(count(), 0u);  // fake time has not moved
  clock.Advance(absl::Seconds(10));
  {
    absl::MutexLock lock(&mu);
    auto two = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return ran.size() == 2; };
    mu.Await(absl::Condition(&two));
  }
  // The third is 20 s of fake time away: a marker due now runs, it does not.
  absl::Notification marker;
  timer.RunAfter(absl::ZeroDuration(), [&] { marker.Notify(); });
  marker.WaitForNotification();
  EXPECT_EQ(count(), 2u);
  clock.Advance(absl::Seconds(20));
  {
    absl::MutexLock lock(&mu);
    auto three = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return ran.size() == 3; };
    mu.Await(absl::Condition(&three));
    EXPECT_EQ(ran, (std::vector<int>{1, 2, 3}));
  }
}

TEST(TimerTest, DestructorRunsWhatIsStillPending) {
  FakeClock clock;
  bool ran = false;
  {
    Timer timer(&clock);
    timer.RunAfter(absl::Hours(1), [&] { ran = true; });
  }
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace ps
