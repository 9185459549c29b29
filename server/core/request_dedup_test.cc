#include "server/core/request_dedup.h"

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

}  // namespace
}  // namespace ps
