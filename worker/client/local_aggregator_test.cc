#include "worker/client/local_aggregator.h"

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// One table "t" of `size` values held in memory; a push subtracts its
// gradient (SGD at rate 1). Records what reached it.
class MemoryUpstream final : public ParamClient {
 public:
  explicit MemoryUpstream(size_t size) : values(size, 0.0f) {}

  absl::Status CreateTable(const proto::TableDef&) override { return absl::OkStatus(); }
  absl::Status Pull(absl::Span<const PullRange> ops, uint64_t, PullInfo*) override {
    ++pulls;
    for (const PullRange& op : ops) std::copy(values.begin(), values.end(), op.out.begin());
    return absl::OkStatus();
  }
  absl::Status Push(absl::Span<const PushRange> ops, uint64_t clock, Versions*) override {
    ++pushes;
    push_clocks.push_back(clock);
    for (const PushRange& op : ops) {
      pushed.emplace_back(op.grads.begin(), op.grads.end());
      if (op.layer_norms != nullptr) norms.push_back(*op.layer_norms);
      for (size_t i = 0; i < values.size(); ++i) values[i] -= op.grads[i];
    }
    return absl::OkStatus();
  }
  int num_servers() const override { return 1; }

  std::vector<float> values;
  int pulls = 0, pushes = 0;
  std::vector<uint64_t> push_clocks;
  std::vector<std::vector<float>> pushed;
  std::vector<proto::LayerNorms> norms;
};

// Runs fn(i) on one thread per member and joins them.
void OnThreads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back(fn, i);
  for (std::thread& t : threads) t.join();
}

// Each round every member pushes its own gradient and reads the result: the
// servers get one push of the sum and are read once, and every member
// reads the same values.
TEST(LocalAggregatorTest, OnePushOfTheSumAndOneSharedPullPerRound) {
  MemoryUpstream upstream(3);
  LocalAggregator aggregator(upstream, 2);
  constexpr int kRounds = 5;
  std::vector<std::vector<float>> read(2, std::vector<float>(3));
  OnThreads(2, [&](int i) {
    ParamClient& client = aggregator.member(i);
    const std::vector<float> g = {1.0f + i, 10.0f * (i + 1), -1.0f};
    for (int r = 0; r < kRounds; ++r) {
      const PushRange push[] = {{"t", 0, 3, g}};
      const PullRange pull[] = {{"t", 0, 3, absl::MakeSpan(read[i])}};
      PullInfo info;
      ASSERT_TRUE(client.PushPull(push, pull, r, &info).ok());
    }
    aggregator.Leave(i);
  });
  EXPECT_EQ(upstream.pushes, kRounds);
  EXPECT_EQ(upstream.pulls, kRounds);
  EXPECT_EQ(upstream.pushed[0], (std::vector<float>{3, 30, -2}));
  EXPECT_EQ(upstream.values, (std::vector<float>{-15, -150, 10}));
  EXPECT_EQ(read[0], upstream.values);
  EXPECT_EQ(read[1], upstream.values);
  EXPECT_EQ(aggregator.values_pushed(), kRounds * 3);
  EXPECT_EQ(aggregator.values_pulled(), kRounds * 3);
  EXPECT_EQ(aggregator.upstream_calls(), kRounds);
}

// Separate reads and pushes (BSP's rounds) count only what each sent.
TEST(LocalAggregatorTest, ReadsAndPushesAreCountedApart) {
  MemoryUpstream upstream(3);
  LocalAggregator aggregator(upstream, 2);
  OnThreads(2, [&](int i) {
    std::vector<float> read(3);
    const std::vector<float> g = {1, 1, 1};
    for (int r = 0; r < 2; ++r) {
      const PullRange pull[] = {{"t", 0, 3, absl::MakeSpan(read)}};
      ASSERT_TRUE(aggregator.member(i).Pull(pull, r, nullptr).ok());
      const PushRange push[] = {{"t", 0, 3, g}};
      ASSERT_TRUE(aggregator.member(i).Push(push, r, nullptr).ok());
    }
  });
  EXPECT_EQ(upstream.pulls, 2);
  EXPECT_EQ(upstream.pushes, 2);
  EXPECT_EQ(aggregator.upstream_calls(), 4);
  EXPECT_EQ(aggregator.values_pulled(), 2 * 3);
  EXPECT_EQ(aggregator.values_pushed(), 2 * 3);
}

// The sum is a pairwise tree over the members' indices, whichever thread
// arrives first: float addition is not associative, and these values tell
// the orders apart ((a + b) + (c + d) = 0; a + b + c + d in a row = 1).
TEST(LocalAggregatorTest, TheSumIsAFixedTreeOverTheMembers) {
  const float g[] = {1e8f, 1.0f, -1e8f, 1.0f};
  const float tree = (g[0] + g[1]) + (g[2] + g[3]);
  const float in_a_row = ((g[0] + g[1]) + g[2]) + g[3];
  ASSERT_NE(tree, in_a_row);
  for (int trial = 0; trial < 20; ++trial) {
    MemoryUpstream upstream(1);
    LocalAggregator aggregator(upstream, 4);
    OnThreads(4, [&](int i) {
      const std::vector<float> mine = {g[i]};
      const PushRange push[] = {{"t", 0, 1, mine}};
      ASSERT_TRUE(aggregator.member(i).Push(push, 0, nullptr).ok());
    });
    ASSERT_EQ(upstream.pushed.size(), 1u);
    EXPECT_EQ(upstream.pushed[0][0], tree) << "trial " << trial;
  }
}

// A member that left is no longer waited for; the others go on.
TEST(LocalAggregatorTest, RoundsGoOnWithoutAMemberThatLeft) {
  MemoryUpstream upstream(1);
  LocalAggregator aggregator(upstream, 2);
  OnThreads(2, [&](int i) {
    const std::vector<float> one = {1.0f};
    const PushRange push[] = {{"t", 0, 1, one}};
    const int rounds = i == 0 ? 4 : 1;
    for (int r = 0; r < rounds; ++r) ASSERT_TRUE(aggregator.member(i).Push(push, r, nullptr).ok());
    aggregator.Leave(i);
  });
  EXPECT_EQ(upstream.push_clocks, (std::vector<uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(upstream.values[0], -5.0f) << "2 in round 0, then 1 a round";
  const std::vector<float> one = {1.0f};
  const PushRange push[] = {{"t", 0, 1, one}};
  EXPECT_EQ(aggregator.member(1).Push(push, 4, nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
}

// Members at different clocks in one round are refused, all of them, and
// nothing reaches the servers.
TEST(LocalAggregatorTest, MembersOutOfStepAreRefused) {
  MemoryUpstream upstream(1);
  LocalAggregator aggregator(upstream, 2);
  std::vector<absl::Status> status(2);
  OnThreads(2, [&](int i) {
    const std::vector<float> one = {1.0f};
    const PushRange push[] = {{"t", 0, 1, one}};
    status[i] = aggregator.member(i).Push(push, 7 + i, nullptr);
  });
  for (const absl::Status& s : status) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("members out of step"));
  }
  EXPECT_EQ(upstream.pushes, 0);
}

// LARS: the pushed norms are of the sum (the weight norm is the members').
TEST(LocalAggregatorTest, LayerNormsAreTheSums) {
  MemoryUpstream upstream(2);
  LocalAggregator aggregator(upstream, 2);
  OnThreads(2, [&](int i) {
    const std::vector<float> g = i == 0 ? std::vector<float>{3, 0} : std::vector<float>{0, 4};
    proto::LayerNorms norms;
    norms.set_weight(7);
    norms.set_gradient(i == 0 ? 3 : 4);
    PushRange op{"t", 0, 2, g};
    op.layer_norms = &norms;
    ASSERT_TRUE(aggregator.member(i).Push({op}, 0, nullptr).ok());
  });
  ASSERT_EQ(upstream.norms.size(), 1u);
  EXPECT_EQ(upstream.norms[0].weight(), 7.0f);
  EXPECT_FLOAT_EQ(upstream.norms[0].gradient(), 5.0f);
}

}  // namespace
}  // namespace ps
