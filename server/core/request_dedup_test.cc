#include "server/core/request_dedup.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(RequestDedupTest, RetriedIdIsAdmittedOnce) {
  FakeClock clock;
  RequestDedup d(&clock, absl::Seconds(60));
  EXPECT_TRUE(*d.Admit(1, 5));
  EXPECT_FALSE(*d.Admit(1, 5));
  EXPECT_TRUE(*d.Admit(2, 5)) << "ids are per worker";
  EXPECT_TRUE(*d.Admit(1, 3)) << "out of order but remembered";
  EXPECT_FALSE(*d.Admit(1, 3));
}

TEST(RequestDedupTest, IdZeroIsNeverDeduplicated) {
  FakeClock clock;
  RequestDedup d(&clock, absl::Seconds(60));
  EXPECT_TRUE(*d.Admit(1, 0));
  EXPECT_TRUE(*d.Admit(1, 0));
}

// A count-bounded window (the old design, 65,536 ids) forgot a retry once
// that many newer pushes had arrived; retention is by time.
TEST(RequestDedupTest, RetryWithinRetentionIsRecognizedAfterManyNewerIds) {
  FakeClock clock;
  RequestDedup d(&clock, absl::Seconds(60));
  ASSERT_TRUE(*d.Admit(7, 1));
  for (uint64_t id = 2; id <= 200'000; ++id) ASSERT_TRUE(*d.Admit(7, id));
  clock.Advance(absl::Seconds(59));
  EXPECT_FALSE(*d.Admit(7, 1)) << "the retry of id 1 must be recognized, not applied again";
}

TEST(RequestDedupTest, IdsForgottenAfterRetentionAreRefusedNotReapplied) {
  FakeClock clock;
  RequestDedup d(&clock, absl::Seconds(10));
  for (uint64_t id = 1; id <= 100; ++id) ASSERT_TRUE(*d.Admit(7, id));
  EXPECT_EQ(d.size(), 100u);
  clock.Advance(absl::Seconds(11));
  ASSERT_TRUE(*d.Admit(7, 101));
  EXPECT_EQ(d.size(), 1u) << "memory is bounded by the retention";
  auto old = d.Admit(7, 50);
  EXPECT_EQ(old.status().code(), absl::StatusCode::kAborted);
  EXPECT_NE(old.status().message().find("worker 7"), std::string::npos);
  EXPECT_NE(old.status().message().find("--dedup_retention_seconds"), std::string::npos);
}

TEST(RequestDedupTest, ExpireForgetsIdleWorkers) {
  FakeClock clock;
  RequestDedup d(&clock, absl::Seconds(10));
  ASSERT_TRUE(*d.Admit(1, 1));
  ASSERT_TRUE(*d.Admit(2, 1));
  clock.Advance(absl::Seconds(11));
  d.Expire();
  EXPECT_EQ(d.size(), 0u);
}

// Ids are remembered a bit each, 64 consecutive ids to a word: ids at a
// word's edges, far apart (two clients under one worker id), and forgotten
// one by one as each one's time passes, are each told apart.
TEST(RequestDedupTest, IdsAcrossWordsAndFarApartAreEachRememberedAndForgotten) {
  FakeClock clock;
  RequestDedup d(&clock, absl::Seconds(10));
  const uint64_t far = uint64_t{1} << 40;
  for (uint64_t id : {uint64_t{63}, uint64_t{64}, uint64_t{127}, far, far + 1}) {
    ASSERT_TRUE(*d.Admit(3, id)) << id;
  }
  clock.Advance(absl::Seconds(5));
  ASSERT_TRUE(*d.Admit(3, 65));
  for (uint64_t id : {uint64_t{63}, uint64_t{64}, uint64_t{65}, uint64_t{127}, far, far + 1}) {
    EXPECT_FALSE(*d.Admit(3, id)) << id << " is remembered";
  }
  EXPECT_TRUE(*d.Admit(3, 66)) << "a neighbour in the same word is new";
  clock.Advance(absl::Seconds(6));  // the first five are past the retention, 65 and 66 not
  EXPECT_FALSE(*d.Admit(3, 65));
  EXPECT_FALSE(*d.Admit(3, 66));
  EXPECT_EQ(d.Admit(3, 64).status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(*d.Admit(3, far + 2));
  EXPECT_EQ(d.size(), 3u);
}

// The arrival order is one vector whose dropped front is moved out as it
// grows: through many such moves, one second of ids at a time expiring,
// exactly the ids within the retention stay remembered, in arrival order
// for Export.
TEST(RequestDedupTest, ExpiryInStepsKeepsExactlyTheIdsWithinTheRetention) {
  FakeClock clock;
  RequestDedup d(&clock, absl::Seconds(10));
  constexpr uint64_t kPerSecond = 100;
  uint64_t next = 1;
  for (int second = 0; second < 40; ++second) {
    for (uint64_t i = 0; i < kPerSecond; ++i, ++next) {
      ASSERT_TRUE(*d.Admit(4, next, /*clock=*/next)) << next;
    }
    clock.Advance(absl::Seconds(1));
  }
  // Admitted at seconds 0-39, now 40: those of seconds 30-39 are within
  // the retention (10 s or less old), the rest forgotten.
  d.Expire();
  EXPECT_EQ(d.size(), 10 * kPerSecond);
  const uint64_t first_kept = 30 * kPerSecond + 1;
  std::vector<RequestDedup::Window> windows = d.Export(/*cut=*/next);
  ASSERT_EQ(windows.size(), 1u);
  ASSERT_EQ(windows[0].request_ids.size(), 10 * kPerSecond);
  EXPECT_EQ(windows[0].request_ids.front(), first_kept);
  EXPECT_EQ(windows[0].request_ids.back(), next - 1);
  EXPECT_EQ(windows[0].forgotten_max, first_kept - 1);
  EXPECT_EQ(d.Admit(4, first_kept - 1).status().code(), absl::StatusCode::kAborted);
  for (uint64_t id = first_kept; id < next; id += 37) EXPECT_FALSE(*d.Admit(4, id)) << id;
  EXPECT_TRUE(*d.Admit(4, next));
}

// Export keeps the ids whose push is below the cut, whatever the order
// they came in.
TEST(RequestDedupTest, ExportKeepsTheIdsOfPushesBelowTheCut) {
  FakeClock clock;
  RequestDedup d(&clock, absl::Seconds(60));
  ASSERT_TRUE(*d.Admit(1, 12, /*clock=*/5));
  ASSERT_TRUE(*d.Admit(1, 10, /*clock=*/3));
  ASSERT_TRUE(*d.Admit(1, 11, /*clock=*/4));
  ASSERT_TRUE(*d.Admit(2, 7, /*clock=*/9));
  std::vector<RequestDedup::Window> windows = d.Export(/*cut=*/5);
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_EQ(windows[0].worker_id, 1u);
  EXPECT_EQ(windows[0].request_ids, (std::vector<uint64_t>{10, 11}));
  EXPECT_TRUE(windows[1].request_ids.empty());
  RequestDedup restored(&clock, absl::Seconds(60));
  restored.Import(windows[0]);
  restored.Import(windows[0]);  // twice: each id once
  EXPECT_EQ(restored.size(), 2u);
  EXPECT_FALSE(*restored.Admit(1, 10));
  EXPECT_TRUE(*restored.Admit(1, 12)) << "its push was after the cut: not in the checkpoint";
}

}  // namespace
}  // namespace ps
