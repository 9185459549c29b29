#include "server/request_dedup.h"

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(RequestDedupTest, RetriedIdIsAdmittedOnce) {
  RequestDedup d;
  EXPECT_TRUE(*d.Admit(1, 5));
  EXPECT_FALSE(*d.Admit(1, 5));
  EXPECT_TRUE(*d.Admit(2, 5)) << "ids are per worker";
  EXPECT_TRUE(*d.Admit(1, 3)) << "out of order but inside the window";
  EXPECT_FALSE(*d.Admit(1, 3));
}

TEST(RequestDedupTest, IdZeroIsNeverDeduplicated) {
  RequestDedup d;
  EXPECT_TRUE(*d.Admit(1, 0));
  EXPECT_TRUE(*d.Admit(1, 0));
}

TEST(RequestDedupTest, IdsOlderThanTheWindowAreRefused) {
  RequestDedup d(/*window=*/10);
  for (uint64_t id = 1; id <= 100; ++id) ASSERT_TRUE(*d.Admit(7, id));
  EXPECT_FALSE(*d.Admit(7, 95));
  auto old = d.Admit(7, 50);
  EXPECT_EQ(old.status().code(), absl::StatusCode::kAborted);
  EXPECT_NE(old.status().message().find("worker 7"), std::string::npos);
}

}  // namespace
}  // namespace ps
