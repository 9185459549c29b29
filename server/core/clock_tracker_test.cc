#include "server/core/clock_tracker.h"

#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// A fake clock and a place to record what a callback was called with.
class ClockTrackerTest : public ::testing::Test {
 protected:
  ClockTrackerTest() : tracker_([this] { return now_; }) {}

  struct Result {
    std::optional<absl::Status> status;
    uint64_t params_clock = 0;
    ClockTracker::Callback Callback() {
      return [this](absl::Status s, uint64_t c) {
        ASSERT_FALSE(status.has_value()) << "callback ran twice";
        status = s;
        params_clock = c;
      };
    }
  };

  absl::Time Far() { return now_ + absl::Hours(1); }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  ClockTracker tracker_;
};

TEST_F(ClockTrackerTest, BspPullWaitsForEveryWorkersPreviousRound) {
  tracker_.Heartbeat(0, 0, absl::Seconds(5));
  EXPECT_EQ(tracker_.Heartbeat(1, 0, absl::Seconds(5)), 2);
  Result first;
  tracker_.WhenPullReady("t", 0, 0, 0, Far(), first.Callback());
  ASSERT_TRUE(first.status.has_value()) << "clock 0 needs nothing";

  Result r;
  tracker_.WhenPullReady("t", 0, 1, 0, Far(), r.Callback());
  EXPECT_FALSE(r.status.has_value());
  tracker_.PushApplied("t", 0, 0, 1);
  EXPECT_FALSE(r.status.has_value()) << "worker 1 has not finished round 0";
  tracker_.PushApplied("t", 1, 0, 1);
  ASSERT_TRUE(r.status.has_value());
  EXPECT_TRUE(r.status->ok());
  EXPECT_EQ(r.params_clock, 1u);
  EXPECT_EQ(tracker_.ServerClock("t"), 1u);
  EXPECT_EQ(tracker_.ParamsClock("other"), 0u) << "tables are tracked separately";
}

TEST_F(ClockTrackerTest, BoundedDelayAllowsTauRoundsOfLag) {
  tracker_.Heartbeat(0, 0, absl::Seconds(5));
  tracker_.Heartbeat(1, 0, absl::Seconds(5));
  for (uint64_t c = 0; c < 3; ++c) tracker_.PushApplied("t", 0, c, 1);
  Result at2, at3;
  tracker_.WhenPullReady("t", 0, 2, 2, Far(), at2.Callback());
  EXPECT_TRUE(at2.status.has_value() && at2.status->ok()) << "needs rounds < 0 only";
  tracker_.WhenPullReady("t", 0, 3, 2, Far(), at3.Callback());
  EXPECT_FALSE(at3.status.has_value()) << "needs worker 1's round 0";
  tracker_.PushApplied("t", 1, 0, 1);
  EXPECT_TRUE(at3.status.has_value() && at3.status->ok());
  EXPECT_EQ(at3.params_clock, 1u);
}

TEST_F(ClockTrackerTest, ExpiredLeaseDropsTheWorkerAndWakesWaiters) {
  tracker_.Heartbeat(0, 0, absl::Seconds(5));
  tracker_.Heartbeat(1, 0, absl::Seconds(1));
  tracker_.PushApplied("t", 0, 0, 1);
  Result r;
  tracker_.WhenPullReady("t", 0, 1, 0, Far(), r.Callback());
  now_ += absl::Milliseconds(900);
  tracker_.Tick();
  EXPECT_FALSE(r.status.has_value());
  now_ += absl::Milliseconds(200);
  tracker_.Tick();
  ASSERT_TRUE(r.status.has_value());
  EXPECT_TRUE(r.status->ok());
  const auto events = tracker_.TakeEvents();
  ASSERT_FALSE(events.empty());
  EXPECT_THAT(events.back(), HasSubstr("worker 1 lease expired (last clock 0)"));
  EXPECT_TRUE(tracker_.TakeEvents().empty()) << "logged once";
  tracker_.Tick();
  EXPECT_TRUE(tracker_.TakeEvents().empty());
  // It comes back and counts again.
  EXPECT_EQ(tracker_.Heartbeat(1, 1, absl::Seconds(1)), 2);
  EXPECT_THAT(tracker_.TakeEvents().back(), HasSubstr("worker 1 registered at clock 1"));
  EXPECT_EQ(tracker_.ParamsClock("t"), 1u);
}

TEST_F(ClockTrackerTest, DeadlineFailsNamingTheSlowestWorker) {
  tracker_.Heartbeat(0, 0, absl::Seconds(60));
  tracker_.Heartbeat(7, 0, absl::Seconds(60));
  for (uint64_t c = 0; c < 5; ++c) tracker_.PushApplied("t", 0, c, 1);
  tracker_.PushApplied("t", 7, 0, 1);
  Result r;
  tracker_.WhenPullReady("t", 0, 5, 1, now_ + absl::Seconds(2), r.Callback());
  now_ += absl::Seconds(3);
  tracker_.Tick();
  ASSERT_TRUE(r.status.has_value());
  EXPECT_EQ(r.status->code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(r.status->message(), HasSubstr("slowest live worker is 7 at clock 1 (needs 4)"));
}

TEST_F(ClockTrackerTest, BspPushWaitsUntilEveryoneReadTheRound) {
  tracker_.Heartbeat(0, 0, absl::Seconds(5));
  tracker_.Heartbeat(1, 0, absl::Seconds(5));
  tracker_.PullServed("t", 0, 0);
  Result push;
  tracker_.WhenPushReady("t", 0, 0, Far(), push.Callback());
  EXPECT_FALSE(push.status.has_value()) << "worker 1 has not read round 0 yet";
  tracker_.PullServed("t", 1, 0);
  EXPECT_TRUE(push.status.has_value() && push.status->ok());
}

// After a failover the new primary has seen none of the round's reads,
// which went to the old one. A push of round t says its worker read t, and
// so does a push of round t applied from the chain: the round's pushes go
// through once every worker has either read it here or pushed it.
TEST_F(ClockTrackerTest, PushesOfARoundStandForItsReads) {
  tracker_.Heartbeat(0, 0, absl::Seconds(5));
  tracker_.Heartbeat(1, 0, absl::Seconds(5));
  tracker_.Heartbeat(2, 0, absl::Seconds(5));
  tracker_.PushApplied("t", 2, 4, 1);  // worker 2's round 4, from the chain
  Result push;
  tracker_.WhenPushReady("t", 0, 4, Far(), push.Callback());
  EXPECT_FALSE(push.status.has_value()) << "worker 1 has neither read nor pushed round 4";
  Result other;
  tracker_.WhenPushReady("t", 1, 4, Far(), other.Callback());
  ASSERT_TRUE(push.status.has_value() && push.status->ok());
  ASSERT_TRUE(other.status.has_value() && other.status->ok());
  // A late part of a finished round still says its round was read.
  tracker_.PushApplied("t", 2, 4, 1);
  Result next;
  tracker_.WhenPushReady("t", 0, 5, Far(), next.Callback());
  EXPECT_FALSE(next.status.has_value()) << "nobody else has read round 5";
}

TEST_F(ClockTrackerTest, RoundCompletesWhenAllPartsAreIn) {
  tracker_.Heartbeat(0, 0, absl::Seconds(5));
  tracker_.PushApplied("t", 0, 0, 3);
  tracker_.PushApplied("t", 0, 0, 3);
  EXPECT_EQ(tracker_.ParamsClock("t"), 0u);
  tracker_.PushApplied("t", 0, 0, 3);
  EXPECT_EQ(tracker_.ParamsClock("t"), 1u);
}

TEST_F(ClockTrackerTest, LeavingWorkerStopsCountingAtOnce) {
  tracker_.Heartbeat(0, 0, absl::Seconds(5));
  tracker_.Heartbeat(1, 0, absl::Seconds(5));
  tracker_.PushApplied("t", 0, 0, 1);
  Result r;
  tracker_.WhenPullReady("t", 0, 1, 0, Far(), r.Callback());
  tracker_.Leave(1);
  EXPECT_TRUE(r.status.has_value() && r.status->ok());
  EXPECT_THAT(tracker_.TakeEvents().back(), HasSubstr("worker 1 left at clock 0"));
}

TEST_F(ClockTrackerTest, CloseEndsEveryWaitAndRefusesNewOnes) {
  tracker_.Heartbeat(0, 0, absl::Seconds(5));
  tracker_.Heartbeat(1, 0, absl::Seconds(5));  // the push waits for worker 1's read
  Result a, b;
  tracker_.WhenPullReady("t", 0, 3, 0, Far(), a.Callback());
  tracker_.WhenPushReady("u", 0, 3, Far(), b.Callback());
  tracker_.Close(absl::UnavailableError("shutting down"));
  EXPECT_EQ(a.status->code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(b.status->code(), absl::StatusCode::kUnavailable);
  Result later;
  tracker_.WhenPullReady("t", 0, 3, 0, Far(), later.Callback());
  ASSERT_TRUE(later.status.has_value());
  EXPECT_EQ(later.status->message(), "shutting down");
}

// A fenced server fails what waits, and parks later waits as before.
TEST_F(ClockTrackerTest, FailWaitingEndsTheWaitsOnlyOfNow) {
  tracker_.Heartbeat(0, 0, absl::Seconds(5));
  tracker_.Heartbeat(1, 0, absl::Seconds(5));
  Result a;
  tracker_.WhenPullReady("t", 0, 3, 0, Far(), a.Callback());
  ASSERT_FALSE(a.status.has_value());
  tracker_.FailWaiting(absl::UnavailableError("fenced"));
  ASSERT_TRUE(a.status.has_value());
  EXPECT_EQ(a.status->code(), absl::StatusCode::kUnavailable);
  Result later;
  tracker_.WhenPullReady("t", 0, 3, 0, Far(), later.Callback());
  EXPECT_FALSE(later.status.has_value()) << "parked, not failed";
}

// The workers BSP waits for: live until they leave or Tick finds their
// lease over.
TEST_F(ClockTrackerTest, LiveWorkersUntilLeftOrExpired) {
  tracker_.Heartbeat(7, 0, absl::Seconds(5));
  tracker_.Heartbeat(2, 0, absl::Seconds(5));
  tracker_.Heartbeat(4, 0, absl::Seconds(1));
  EXPECT_EQ(tracker_.LiveWorkers(), (std::vector<uint32_t>{2, 4, 7}));
  tracker_.Leave(7);
  now_ += absl::Seconds(2);
  EXPECT_EQ(tracker_.LiveWorkers(), (std::vector<uint32_t>{2, 4})) << "4 counts until Tick";
  tracker_.Tick();
  EXPECT_EQ(tracker_.LiveWorkers(), (std::vector<uint32_t>{2}));
}

TEST_F(ClockTrackerTest, NoLiveWorkersMeansNoWait) {
  Result r;
  tracker_.WhenPullReady("t", 0, 10, 0, Far(), r.Callback());
  EXPECT_TRUE(r.status.has_value() && r.status->ok());
}

}  // namespace
}  // namespace ps

namespace ps {
namespace {

// Parts are counted per (worker, table, clock): with communication
// overlapped, parts of round 1 arrive between those of round 0, and must not
// reset round 0's count (with one count per worker, neither round ever
// completed).
// Two shards' trackers of one process share its count of parked calls (3):
// each may park up to its own limit (5), but not past the process's; a
// call that ends (cancelled, answered, failed) gives its unit back.
TEST(ClockTrackerProcessTest, TrackersOfOneProcessShareItsParkedCallLimit) {
  absl::Time now = absl::FromUnixSeconds(1000);
  MemoryBudget parked(3);
  ClockTracker a([&] { return now; }, 5, &parked);
  ClockTracker b([&] { return now; }, 5, &parked);
  for (ClockTracker* t : {&a, &b}) {
    t->Heartbeat(0, 0, absl::Seconds(5));
    t->Heartbeat(1, 0, absl::Seconds(5));
  }
  std::vector<absl::Status> done;
  auto callback = [&](absl::Status s, uint64_t) { done.push_back(s); };
  const absl::Time far = now + absl::Hours(1);
  // Pulls at clock 1 wait for both workers' round 0.
  const ClockTracker::WaitId a1 = a.WhenPullReady("t", 0, 1, 0, far, callback);
  a.WhenPullReady("t", 0, 1, 0, far, callback);
  b.WhenPullReady("t", 0, 1, 0, far, callback);
  EXPECT_TRUE(done.empty());
  EXPECT_EQ(parked.used(), 3u);
  b.WhenPullReady("t", 0, 1, 0, far, callback);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(done[0].message()),
              HasSubstr("3 calls already wait in this server process, over all its shards"));
  a.Cancel(a1);
  EXPECT_EQ(parked.used(), 2u);
  b.WhenPullReady("t", 0, 1, 0, far, callback);
  EXPECT_EQ(parked.used(), 3u) << "the unit given back is taken";
  b.PushApplied("t", 0, 0, 1);
  b.PushApplied("t", 1, 0, 1);  // b's two pulls are answered
  EXPECT_EQ(parked.used(), 1u);
  a.FailWaiting(absl::UnavailableError("fenced"));
  EXPECT_EQ(parked.used(), 0u);
}

TEST(ClockTrackerRoundsTest, OverlappingRoundsKeepTheirOwnPartCounts) {
  ClockTracker tracker;
  tracker.Heartbeat(0, 0, absl::Seconds(60));
  tracker.PushApplied("t", 0, /*clock=*/0, /*parts=*/2);
  tracker.PushApplied("t", 0, 1, 2);
  EXPECT_EQ(tracker.ServerClock("t"), 0u);
  tracker.PushApplied("t", 0, 0, 2);
  EXPECT_EQ(tracker.ServerClock("t"), 1u) << "round 0 has both its parts";
  tracker.PushApplied("t", 0, 1, 2);
  EXPECT_EQ(tracker.ServerClock("t"), 2u) << "round 1 has both its parts";
  EXPECT_EQ(tracker.ParamsClock("t"), 2u);
}

TEST(ClockTrackerRoundsTest, QueriesAboutATableCreateNoState) {
  ClockTracker tracker;
  tracker.Heartbeat(0, 0, absl::Seconds(60));
  EXPECT_EQ(tracker.ServerClock("nope"), 0u);
  EXPECT_EQ(tracker.ParamsClock("nope"), 0u);
  bool ran = false;
  tracker.WhenPullReady("nope", 0, 0, 0, absl::InfiniteFuture(),
                        [&ran](absl::Status, uint64_t) { ran = true; });
  EXPECT_TRUE(ran);
  EXPECT_EQ(tracker.num_tables(), 0u);
}

}  // namespace
}  // namespace ps
