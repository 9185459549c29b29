#include "worker/lbfgs/portion_scheduler.h"

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace lbfgs {
namespace {

using ::testing::HasSubstr;
using Task = PortionScheduler::Task;

constexpr absl::Duration kNoWait = absl::ZeroDuration();

class PortionSchedulerTest : public ::testing::Test {
 protected:
  PortionSchedulerTest() : scheduler_(SchedulerOptions(), &clock_) {}

  // The portion Next hands `worker` without waiting, or -1.
  int Take(uint32_t worker) {
    std::optional<Task> t = scheduler_.Next(worker, kNoWait);
    return t ? t->portion : -1;
  }

  // Advances the fake clock until `done` is notified (another thread waits on the clock).
  void AdvanceUntil(absl::Notification& done, absl::Duration step) {
    while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(1))) clock_.Advance(step);
  }

  FakeClock clock_;
  PortionScheduler scheduler_;
};

TEST_F(PortionSchedulerTest, HandsOutPortionsLowestFirst) {
  ASSERT_TRUE(scheduler_.Begin(1, 4).ok());
  for (int expected = 0; expected < 4; ++expected) {
    std::optional<Task> t = scheduler_.Next(expected % 2, kNoWait);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->evaluation, 1u);
    EXPECT_EQ(t->portion, expected);
    EXPECT_FALSE(t->backup);
  }
  EXPECT_FALSE(scheduler_.Next(5, kNoWait).has_value()) << "all running, none due a backup";
}

TEST_F(PortionSchedulerTest, NothingBeforeTheFirstBegin) {
  EXPECT_FALSE(scheduler_.Next(1, kNoWait).has_value());
  EXPECT_EQ(scheduler_.AwaitDone(kNoWait).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(PortionSchedulerTest, AWorkerThatTakesMoreGetsMore) {
  ASSERT_TRUE(scheduler_.Begin(1, 10).ok());
  ASSERT_EQ(Take(2), 0);  // the slow worker holds portion 0 throughout
  for (int p = 1; p < 10; ++p) {
    ASSERT_EQ(Take(1), p);
    clock_.Advance(absl::Milliseconds(10));
    EXPECT_TRUE(scheduler_.Finish(1, 1, p, 1.0, 100));
  }
  EXPECT_TRUE(scheduler_.Finish(2, 1, 0, 1.0, 100));
  EXPECT_TRUE(scheduler_.AwaitDone(kNoWait).ok());
  EXPECT_EQ(scheduler_.PortionsByWorker(), (std::map<uint32_t, int>{{1, 9}, {2, 1}}));
  EXPECT_EQ(scheduler_.totals().examples, 1000u);
  EXPECT_DOUBLE_EQ(scheduler_.totals().loss, 10.0);
}

TEST_F(PortionSchedulerTest, BackupOnlyAfterBackupAfterAndOnlyToAnotherWorker) {
  ASSERT_TRUE(scheduler_.Begin(1, 1).ok());
  ASSERT_EQ(Take(1), 0);
  EXPECT_EQ(Take(2), -1) << "just started";
  clock_.Advance(absl::Milliseconds(199));
  EXPECT_EQ(Take(2), -1) << "199ms < backup_after";
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(Take(1), -1) << "worker 1 already runs portion 0";
  std::optional<Task> backup = scheduler_.Next(2, kNoWait);
  ASSERT_TRUE(backup.has_value());
  EXPECT_EQ(backup->portion, 0);
  EXPECT_TRUE(backup->backup);
  EXPECT_EQ(Take(3), -1) << "max_copies = 2 are running";
  clock_.Advance(absl::Seconds(10));
  EXPECT_EQ(Take(3), -1);
  EXPECT_EQ(scheduler_.totals().backups_started, 1);
}

TEST_F(PortionSchedulerTest, BackupGoesToThePortionStartedLongestAgo) {
  ASSERT_TRUE(scheduler_.Begin(1, 3).ok());
  ASSERT_EQ(Take(1), 0);
  clock_.Advance(absl::Milliseconds(50));
  ASSERT_EQ(Take(2), 1);
  clock_.Advance(absl::Milliseconds(50));
  ASSERT_EQ(Take(3), 2);
  EXPECT_TRUE(scheduler_.Finish(1, 1, 0, 0, 0));
  clock_.Advance(absl::Milliseconds(160));  // portion 1 has run 210ms, portion 2 160ms
  EXPECT_EQ(Take(1), 1);
  EXPECT_EQ(Take(4), -1) << "portion 2 is not due yet, portion 1 has 2 copies";
  clock_.Advance(absl::Milliseconds(40));
  EXPECT_EQ(Take(4), 2);
}

TEST_F(PortionSchedulerTest, FirstResultIsKeptAndTheDuplicateDropped) {
  ASSERT_TRUE(scheduler_.Begin(1, 2).ok());
  ASSERT_EQ(Take(1), 0);
  ASSERT_EQ(Take(1), 1);
  clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(Take(2), 0);  // backup
  EXPECT_TRUE(scheduler_.Finish(2, 1, 0, 1.5, 10));
  EXPECT_FALSE(scheduler_.Finish(1, 1, 0, 99, 99));
  EXPECT_TRUE(scheduler_.Finish(1, 1, 1, 0.5, 5));
  PortionScheduler::Totals t = scheduler_.totals();
  EXPECT_DOUBLE_EQ(t.loss, 2.0);
  EXPECT_EQ(t.examples, 15u);
  EXPECT_EQ(t.duplicates_dropped, 1);
  EXPECT_EQ(t.backups_started, 1);
  EXPECT_EQ(scheduler_.PortionsByWorker(), (std::map<uint32_t, int>{{1, 1}, {2, 1}}));
  EXPECT_TRUE(scheduler_.AwaitDone(kNoWait).ok());
}

TEST_F(PortionSchedulerTest, FailReassignsAPortionWithNoCopyLeft) {
  ASSERT_TRUE(scheduler_.Begin(1, 3).ok());
  ASSERT_EQ(Take(1), 0);
  ASSERT_EQ(Take(2), 1);
  scheduler_.Fail(3, 1, 1);  // not running it: ignored
  scheduler_.Fail(1, 1, 0);
  std::optional<Task> t = scheduler_.Next(3, kNoWait);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->portion, 0) << "a failed portion goes before higher unassigned ones";
  EXPECT_FALSE(t->backup);
  EXPECT_EQ(Take(3), 2);
  EXPECT_EQ(Take(4), -1) << "portion 1 still runs on worker 2";
  // A failed backup leaves the first copy running; the portion is due a backup again.
  clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(Take(4), 0);
  scheduler_.Fail(4, 1, 0);
  EXPECT_EQ(Take(5), 0) << "worker 3's copy still runs, so 5 gets a backup, not a fresh copy";
  EXPECT_EQ(scheduler_.totals().backups_started, 2);
}

TEST_F(PortionSchedulerTest, ResultsOfAnAbandonedEvaluationAreDropped) {
  ASSERT_TRUE(scheduler_.Begin(1, 2).ok());
  ASSERT_EQ(Take(1), 0);
  ASSERT_TRUE(scheduler_.Begin(2, 2).ok());
  EXPECT_FALSE(scheduler_.Finish(1, 1, 0, 5, 5));
  scheduler_.Fail(1, 1, 0);  // ignored too
  PortionScheduler::Totals t = scheduler_.totals();
  EXPECT_EQ(t.loss, 0);
  EXPECT_EQ(t.examples, 0u);
  EXPECT_EQ(t.duplicates_dropped, 0);
  EXPECT_TRUE(scheduler_.PortionsByWorker().empty());
  std::optional<Task> next = scheduler_.Next(1, kNoWait);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->evaluation, 2u);
  EXPECT_EQ(next->portion, 0);
  EXPECT_FALSE(scheduler_.Finish(1, 2, 7, 1, 1)) << "no such portion";
  EXPECT_EQ(scheduler_.Begin(2, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler_.Begin(1, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler_.Begin(3, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler_.Next(2, kNoWait)->evaluation, 2u) << "a refused Begin changes nothing";
}

TEST_F(PortionSchedulerTest, AwaitDoneTimesOutNamingThePortionsLeft) {
  ASSERT_TRUE(scheduler_.Begin(7, 3).ok());
  ASSERT_EQ(Take(1), 0);
  ASSERT_EQ(Take(4), 1);
  ASSERT_TRUE(scheduler_.Finish(1, 7, 0, 0, 0));
  absl::Status status;
  absl::Notification done;
  const absl::Time start = clock_.Now();
  std::thread waiter([&] {
    status = scheduler_.AwaitDone(absl::Seconds(5));
    done.Notify();
  });
  AdvanceUntil(done, absl::Milliseconds(100));
  waiter.join();
  EXPECT_GE(clock_.Now() - start, absl::Seconds(5));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(status.message()), HasSubstr("evaluation 7"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("2 of 3 portions"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("portion 1 (running on worker 4)"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("portion 2 (unassigned)"));
}

TEST_F(PortionSchedulerTest, AwaitDoneReturnsWhenTheLastPortionFinishes) {
  ASSERT_TRUE(scheduler_.Begin(1, 1).ok());
  ASSERT_EQ(Take(1), 0);
  absl::Status status = absl::UnknownError("not run");
  std::thread waiter([&] { status = scheduler_.AwaitDone(absl::InfiniteDuration()); });
  EXPECT_TRUE(scheduler_.Finish(1, 1, 0, 1, 1));
  waiter.join();
  EXPECT_TRUE(status.ok()) << status;
}

TEST_F(PortionSchedulerTest, AwaitDoneIsAbortedByANewEvaluation) {
  ASSERT_TRUE(scheduler_.Begin(1, 1).ok());
  absl::Status status;
  absl::Notification done;
  std::thread waiter([&] {
    status = scheduler_.AwaitDone(absl::InfiniteDuration());
    done.Notify();
  });
  // The waiter awaits whichever evaluation is current when it starts; the next Begin
  // abandons it.
  uint64_t evaluation = 1;
  while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(1))) {
    ASSERT_TRUE(scheduler_.Begin(++evaluation, 1).ok());
  }
  waiter.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(status.message()), HasSubstr("was abandoned"));
  EXPECT_GE(evaluation, 2u);
}

TEST_F(PortionSchedulerTest, NextReturnsNulloptAfterStop) {
  ASSERT_TRUE(scheduler_.Begin(1, 3).ok());
  scheduler_.Stop();
  EXPECT_FALSE(scheduler_.Next(1, absl::Hours(1)).has_value()) << "even with portions left";
  EXPECT_EQ(scheduler_.AwaitDone(absl::Hours(1)).code(), absl::StatusCode::kCancelled);
}

TEST_F(PortionSchedulerTest, StopWakesABlockedNext) {
  std::optional<Task> t = Task{0, 0, false};
  std::thread worker([&] { t = scheduler_.Next(1, absl::InfiniteDuration()); });
  scheduler_.Stop();
  worker.join();
  EXPECT_FALSE(t.has_value());
}

TEST_F(PortionSchedulerTest, BeginWakesABlockedNext) {
  std::optional<Task> t;
  absl::Notification got;
  std::thread worker([&] {
    t = scheduler_.Next(1, absl::InfiniteDuration());
    got.Notify();
  });
  EXPECT_FALSE(got.WaitForNotificationWithTimeout(absl::Milliseconds(20)))
      << "nothing to hand out before Begin";
  ASSERT_TRUE(scheduler_.Begin(3, 2).ok());
  worker.join();
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->evaluation, 3u);
  EXPECT_EQ(t->portion, 0);
}

TEST_F(PortionSchedulerTest, ABlockedNextGetsTheBackupWhenItFallsDue) {
  ASSERT_TRUE(scheduler_.Begin(1, 1).ok());
  ASSERT_EQ(Take(1), 0);
  const absl::Time start = clock_.Now();
  std::optional<Task> t;
  absl::Notification got;
  std::thread worker([&] {
    t = scheduler_.Next(2, absl::InfiniteDuration());
    got.Notify();
  });
  AdvanceUntil(got, absl::Milliseconds(10));
  worker.join();
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(t->backup);
  EXPECT_GE(clock_.Now() - start, absl::Milliseconds(200));
}

TEST_F(PortionSchedulerTest, NextGivesUpAfterItsWaitOnTheClock) {
  ASSERT_TRUE(scheduler_.Begin(1, 1).ok());
  ASSERT_EQ(Take(1), 0);
  std::optional<Task> t = Task{0, 0, false};
  absl::Notification got;
  const absl::Time start = clock_.Now();
  std::thread worker([&] {
    t = scheduler_.Next(1, absl::Seconds(2));  // worker 1 never gets its own portion again
    got.Notify();
  });
  AdvanceUntil(got, absl::Milliseconds(100));
  worker.join();
  EXPECT_FALSE(t.has_value());
  EXPECT_GE(clock_.Now() - start, absl::Seconds(2));
}

TEST_F(PortionSchedulerTest, ConcurrentWorkersFinishEveryPortionOnce) {
  constexpr int kPortions = 500;
  ASSERT_TRUE(scheduler_.Begin(9, kPortions).ok());
  std::atomic<int> kept{0};
  std::vector<std::thread> workers;
  for (uint32_t w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      int n = 0;
      while (std::optional<Task> t = scheduler_.Next(w, kNoWait)) {
        if (w == 3 && ++n % 5 == 0) {
          scheduler_.Fail(w, t->evaluation, t->portion);  // worker 3 drops some
          continue;
        }
        if (scheduler_.Finish(w, t->evaluation, t->portion, 0.5, 2)) ++kept;
      }
    });
  }
  for (std::thread& t : workers) t.join();
  // Portions worker 3 failed after the others stopped asking are left: finish them here.
  while (std::optional<Task> t = scheduler_.Next(0, kNoWait)) {
    if (scheduler_.Finish(0, t->evaluation, t->portion, 0.5, 2)) ++kept;
  }
  EXPECT_TRUE(scheduler_.AwaitDone(kNoWait).ok());
  EXPECT_EQ(kept.load(), kPortions);
  EXPECT_DOUBLE_EQ(scheduler_.totals().loss, 0.5 * kPortions);
  EXPECT_EQ(scheduler_.totals().examples, 2u * kPortions);
  int sum = 0;
  for (const auto& [worker, count] : scheduler_.PortionsByWorker()) sum += count;
  EXPECT_EQ(sum, kPortions);
}

}  // namespace
}  // namespace lbfgs
}  // namespace ps
