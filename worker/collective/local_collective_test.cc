// LocalCollective: the threads of one group get the hand-computed results
// (sums in rank order, the same bits everywhere), and a member that does not
// come, or calls another operation, fails the others instead of hanging.
#include "worker/collective/local_collective.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/on_each_member.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

TEST(LocalCollectiveTest, AllreduceAllgatherAndBroadcastGiveTheHandComputedValues) {
  LocalGroup group(3, absl::Seconds(30));
  std::vector<std::vector<float>> sums(3), gathered(3), broadcast(3);
  std::vector<absl::Status> status(3);
  OnEachMember(group, [&](int r, Collective* c) {
    EXPECT_EQ(c->rank(), r);
    EXPECT_EQ(c->size(), 3);
    for (int step = 0; step < 5; ++step) {  // several rounds in a row
      sums[r] = {static_cast<float>(r), 10.0f * r + step};
      status[r].Update(c->AllreduceSum(absl::MakeSpan(sums[r])));
    }
    const std::vector<float> mine = {static_cast<float>(r), -static_cast<float>(r)};
    gathered[r].assign(6, 0.0f);
    status[r].Update(c->Allgather(mine, absl::MakeSpan(gathered[r])));
    broadcast[r] = {r == 2 ? 4.0f : 0.0f};
    status[r].Update(c->Broadcast(absl::MakeSpan(broadcast[r]), 2));
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(status[r].ok()) << status[r];
    EXPECT_EQ(sums[r], (std::vector<float>{3, 42}));  // 0+1+2; 4+14+24 at step 4
    EXPECT_EQ(gathered[r], (std::vector<float>{0, 0, 1, -1, 2, -2}));
    EXPECT_EQ(broadcast[r], std::vector<float>{4});
  }
}

TEST(LocalCollectiveTest, SumsInRankOrderGiveEveryMemberTheSameBits) {
  LocalGroup group(4, absl::Seconds(30));
  std::vector<std::vector<float>> data(4);
  OnEachMember(group, [&](int r, Collective* c) {
    data[r] = {r == 0 ? 1e8f : 1.0f};  // 1e8 + 1 + 1 + 1 rounds in float
    ASSERT_TRUE(c->AllreduceSum(absl::MakeSpan(data[r])).ok());
  });
  const float want = ((1e8f + 1.0f) + 1.0f) + 1.0f;
  for (int r = 0; r < 4; ++r) EXPECT_EQ(data[r][0], want) << r;
}

TEST(LocalCollectiveTest, AMemberThatDoesNotComeFailsTheOthers) {
  LocalGroup group(3, absl::Milliseconds(200));
  std::vector<absl::Status> status(3);
  OnEachMember(group, [&](int r, Collective* c) {
    if (r == 1) return;  // gone
    std::vector<float> data = {1};
    status[r] = c->AllreduceSum(absl::MakeSpan(data));
  });
  for (int r : {0, 2}) {
    EXPECT_TRUE(status[r].code() == absl::StatusCode::kDeadlineExceeded ||
                status[r].code() == absl::StatusCode::kFailedPrecondition)
        << status[r];
    EXPECT_THAT(status[r].message(), HasSubstr("rank(s) 1 did not come"));
  }
  std::vector<float> later = {1};
  EXPECT_EQ(group.Member(0)->AllreduceSum(absl::MakeSpan(later)).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(LocalCollectiveTest, DifferentOperationsBreakTheGroup) {
  LocalGroup group(2, absl::Seconds(5));
  std::vector<absl::Status> status(2);
  OnEachMember(group, [&](int r, Collective* c) {
    std::vector<float> data(r == 0 ? 2 : 3, 1.0f);
    status[r] = c->AllreduceSum(absl::MakeSpan(data));
  });
  // The second to arrive sees the mismatch; the first is woken by it.
  int invalid = 0;
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(status[r].ok());
    invalid += status[r].code() == absl::StatusCode::kInvalidArgument;
    EXPECT_THAT(status[r].message(), HasSubstr("AllreduceSum of"));
  }
  EXPECT_EQ(invalid, 1);
  std::vector<float> out(3);
  EXPECT_EQ(group.Member(0)->Allgather(std::vector<float>{1, 2}, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);  // 2 * 2 values, not 3
}

TEST(LocalCollectiveTest, SplitGroupsByColorRankedByKey) {
  LocalGroup group(4, absl::Seconds(30));
  std::vector<int> ranks(4), sizes(4);
  std::vector<std::vector<float>> sums(4), again(4);
  OnEachMember(group, [&](int r, Collective* c) {
    // Even and odd ranks; within each, the higher old rank first.
    absl::StatusOr<std::unique_ptr<Collective>> half = c->Split(r % 2, -r);
    ASSERT_TRUE(half.ok()) << half.status();
    ranks[r] = (*half)->rank();
    sizes[r] = (*half)->size();
    sums[r] = {static_cast<float>(r)};
    ASSERT_TRUE((*half)->AllreduceSum(absl::MakeSpan(sums[r])).ok());
    // A second split (every member alone) is a group of its own.
    absl::StatusOr<std::unique_ptr<Collective>> alone = c->Split(r, 0);
    ASSERT_TRUE(alone.ok());
    again[r] = {1.0f};
    ASSERT_TRUE((*alone)->AllreduceSum(absl::MakeSpan(again[r])).ok());
    EXPECT_EQ((*alone)->size(), 1);
  });
  EXPECT_EQ(ranks, (std::vector<int>{1, 1, 0, 0}));
  EXPECT_EQ(sizes, (std::vector<int>{2, 2, 2, 2}));
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(sums[r], std::vector<float>{r % 2 == 0 ? 2.0f : 4.0f}) << r;  // 0+2, 1+3
    EXPECT_EQ(again[r], std::vector<float>{1.0f}) << r;
  }
  EXPECT_EQ(group.Member(0)->Split(-1, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
