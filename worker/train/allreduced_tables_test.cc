// AllreducedTables among threads (LocalGroup): after each step every member
// holds the same bits, equal to the optimizer's step on the mean gradient
// computed by hand; SyncFrom starts everyone from the root's values; bad
// gradients are refused naming the table.
#include "worker/train/allreduced_tables.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/table_defs.h"
#include "worker/collective/local_collective.h"
#include "worker/collective/on_each_member.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

TEST(AllreducedTablesTest, EveryMemberTakesTheSameStepOnTheMeanGradient) {
  LocalGroup group(3, absl::Seconds(30));
  const std::vector<proto::TableDef> defs = {WithSgd(DenseTableDef("w", 2, 2), 0.5f),
                                             WithAdagrad(DenseTableDef("b", 1, 1), 0.1f, 0.1f)};
  std::vector<std::vector<float>> w(3), b(3);
  OnEachMember(group, [&](int r, Collective* c) {
    auto tables = AllreducedTables::Create(defs, c);
    ASSERT_TRUE(tables.ok()) << tables.status();
    if (r == 0) {  // only the root has the starting values
      std::vector<float> start = {1, 2, 3, 4};
      std::copy(start.begin(), start.end(), (*tables)->values(0).begin());
    }
    ASSERT_TRUE((*tables)->SyncFrom(0).ok());
    // Member r's gradients: w gets r + 1 everywhere (mean 2), b gets 3r (mean 3).
    const std::vector<float> gw(4, static_cast<float>(r + 1)), gb = {3.0f * r};
    const absl::Span<const float> grads[] = {gw, gb};
    ASSERT_TRUE((*tables)->Step(grads).ok());
    w[r].assign((*tables)->values(0).begin(), (*tables)->values(0).end());
    b[r].assign((*tables)->values(1).begin(), (*tables)->values(1).end());
  });
  // SGD at 0.5 on the mean 2: each value - 1.
  EXPECT_EQ(w[0], (std::vector<float>{0, 1, 2, 3}));
  // AdaGrad: acc = 0.1 + 9, b = 0 - 0.1 * 3 / sqrt(9.1) (within the kernel's fast sqrt).
  EXPECT_NEAR(b[0][0], -0.3 / std::sqrt(9.1), 1e-6);
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(w[r], w[0]) << r;
    EXPECT_EQ(b[r], b[0]) << r;  // the same bits on every member
  }
}

// Member r has r + 1 batches: the rounds go on until the last member ends,
// each round's step being the mean over the members that had a batch.
TEST(AllreducedTablesTest, MembersWithFewerBatchesJoinTheRoundsUntilAllHaveEnded) {
  LocalGroup group(3, absl::Seconds(30));
  const std::vector<proto::TableDef> defs = {WithSgd(DenseTableDef("w", 1, 1), 1.0f)};
  std::vector<float> w(3);
  std::vector<int64_t> joined(3), rounds(3);
  OnEachMember(group, [&](int r, Collective* c) {
    auto tables = AllreducedTables::Create(defs, c);
    ASSERT_TRUE(tables.ok()) << tables.status();
    for (int step = 0; step <= r; ++step) {
      // Member r's gradient at its step s: 10^r (round s's mean: the mean over
      // the members still training).
      const std::vector<float> g = {r == 0 ? 1.0f : r == 1 ? 10.0f : 100.0f};
      const absl::Span<const float> grads[] = {g};
      ASSERT_TRUE((*tables)->Step(grads).ok());
    }
    absl::StatusOr<int64_t> j = (*tables)->Finish();
    ASSERT_TRUE(j.ok()) << j.status();
    joined[r] = *j;
    rounds[r] = static_cast<int64_t>((*tables)->rounds());
    w[r] = (*tables)->values(0)[0];
    ASSERT_TRUE((*tables)->CheckIdentical().ok());
  });
  EXPECT_EQ(joined, (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(rounds, (std::vector<int64_t>{3, 3, 3}));
  // Rounds: mean(1, 10, 100) = 37, mean(10, 100) = 55, then 100.
  EXPECT_FLOAT_EQ(w[0], -(37.0f + 55.0f + 100.0f));
  EXPECT_EQ(w[1], w[0]);
  EXPECT_EQ(w[2], w[0]);
}

TEST(AllreducedTablesTest, CheckIdenticalNamesTheMembersThatDiffer) {
  LocalGroup group(3, absl::Seconds(30));
  const std::vector<proto::TableDef> defs = {WithSgd(DenseTableDef("w", 4, 1), 1.0f)};
  std::vector<absl::Status> status(3);
  OnEachMember(group, [&](int r, Collective* c) {
    auto tables = AllreducedTables::Create(defs, c);
    ASSERT_TRUE(tables.ok()) << tables.status();
    if (r == 2) (*tables)->values(0)[3] = 1e-30f;  // one value off by a little
    status[r] = (*tables)->CheckIdentical();
  });
  for (const absl::Status& s : status) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.message(), HasSubstr("member(s) 2 of 3"));
  }
}

TEST(AllreducedTablesTest, RefusesSparseTablesAndGradientsOfTheWrongSize) {
  LocalGroup group(1, absl::Seconds(5));
  auto sparse = AllreducedTables::Create({SparseTableDef("emb", 4, 8)}, group.Member(0));
  EXPECT_EQ(sparse.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sparse.status().message(), HasSubstr("table 'emb': only dense tables"));
  auto tables =
      AllreducedTables::Create({WithSgd(DenseTableDef("w", 3, 1), 0.1f)}, group.Member(0));
  ASSERT_TRUE(tables.ok());
  const std::vector<float> short_grad = {1, 2};
  const absl::Span<const float> grads[] = {short_grad};
  const absl::Status s = (*tables)->Step(grads);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("table 'w': a gradient of 2 values for 3"));
  EXPECT_THAT((*tables)->values(0), ::testing::Each(0.0f));  // nothing applied
}

}  // namespace
}  // namespace ps
