#include "server/core/round_reducer.h"

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// Pushes of table "t", keys [0, n), kept alive for the reducer.
class Pushes {
 public:
  const PushArgs* Add(uint32_t worker, uint32_t first, uint32_t size, std::vector<float> values,
                      uint64_t request_id = 0, uint64_t clock = 3, uint32_t parts = 1) {
    PushArgs& a = args_.emplace_back();
    a.header.set_table("t");
    a.header.set_worker_id(worker);
    a.header.set_clock(clock);
    a.header.set_request_id(request_id != 0 ? request_id : ++next_id_);
    a.header.set_round_parts(parts);
    a.header.mutable_reduce()->set_first(first);
    a.header.mutable_reduce()->set_size(size);
    a.value_storage = std::move(values);
    a.values = a.value_storage;
    a.keys = KeySpec::Single(0, a.value_storage.size());
    return &a;
  }

 private:
  std::deque<PushArgs> args_;
  uint64_t next_id_ = 100;
};

// Collects the replies of held pushes.
struct Replies {
  RoundReducer::Done Done() {
    return [this](absl::StatusOr<proto::PushResponse> r) { got.push_back(r.status()); };
  }
  std::vector<absl::Status> got;
};

const absl::Time kFar = absl::InfiniteFuture();

// Values for which float addition's order shows: (a + b) + (c + d) = 0,
// a + b + c + d in a row = 1.
const float kA = 1e8f, kB = 1.0f, kC = -1e8f, kD = 1.0f;

std::vector<float> SumOf(const std::optional<RoundReducer::Round>& round) {
  EXPECT_TRUE(round.has_value());
  if (!round.has_value()) return {};
  absl::StatusOr<std::vector<RoundReducer::Sum>> sums = RoundReducer::SumRound(*round);
  EXPECT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(sums->size(), 1u);
  return sums->front().values;
}

// The sum is the tree over the logical workers, whatever the arrival
// order, and a host's block (its workers' sum, as its aggregator computes
// it) is an inner node of the same tree: both give the same bits.
TEST(RoundReducerTest, TheSumIsOneTreeWhateverTheOrderAndTheGrouping) {
  const float tree = (kA + kB) + (kC + kD);
  ASSERT_NE(tree, ((kA + kB) + kC) + kD);
  std::vector<int> order = {0, 1, 2, 3};
  const float leaf[] = {kA, kB, kC, kD};
  do {
    Pushes pushes;
    RoundReducer reducer;
    Replies replies;
    const std::vector<uint32_t> live = {0, 1, 2, 3};
    std::optional<RoundReducer::Round> round;
    for (int w : order) {
      round = reducer.Add(pushes.Add(w, w, 1, {leaf[w], 2.0f * w}), kFar, replies.Done(), live);
      if (w != order.back()) {
        EXPECT_FALSE(round.has_value());
      }
    }
    EXPECT_EQ(SumOf(round), (std::vector<float>{tree, 12.0f}));
  } while (std::next_permutation(order.begin(), order.end()));
  // Two hosts of two (ids 0 and 1), each pushing its pair's sum.
  for (bool host1_first : {false, true}) {
    Pushes pushes;
    RoundReducer reducer;
    Replies replies;
    const std::vector<uint32_t> live = {0, 1};
    const PushArgs* host0 = pushes.Add(0, 0, 2, {kA + kB, 2.0f});
    const PushArgs* host1 = pushes.Add(1, 2, 2, {kC + kD, 10.0f});
    std::optional<RoundReducer::Round> round =
        reducer.Add(host1_first ? host1 : host0, kFar, replies.Done(), live);
    EXPECT_FALSE(round.has_value());
    round = reducer.Add(host1_first ? host0 : host1, kFar, replies.Done(), live);
    EXPECT_EQ(SumOf(round), (std::vector<float>{tree, 12.0f}));
  }
}

// A round waits for every part of every live worker; a retry of a held
// push waits on it rather than counting twice.
TEST(RoundReducerTest, WaitsForEveryPartAndFoldsRetries) {
  Pushes pushes;
  RoundReducer reducer;
  Replies replies;
  const std::vector<uint32_t> live = {0, 1};
  EXPECT_FALSE(reducer.Add(pushes.Add(0, 0, 1, {1}, 7, 3, 2), kFar, replies.Done(), live));
  EXPECT_FALSE(reducer.Add(pushes.Add(0, 0, 1, {1}, 7, 3, 2), kFar, replies.Done(), live))
      << "a retry of part 1 is not part 2";
  EXPECT_EQ(reducer.held(), 1u);
  EXPECT_FALSE(reducer.Add(pushes.Add(1, 1, 1, {2}), kFar, replies.Done(), live));
  std::optional<RoundReducer::Round> round =
      reducer.Add(pushes.Add(0, 0, 1, {1}, 8, 3, 2), kFar, replies.Done(), live);
  ASSERT_TRUE(round.has_value());
  EXPECT_EQ(round->pushes.size(), 3u);
  EXPECT_EQ(round->pushes[0].dones.size(), 2u);
  EXPECT_EQ(reducer.held(), 0u);
}

// A worker whose lease ended no longer holds the round; a push past its
// deadline fails and leaves it.
TEST(RoundReducerTest, TickCompletesRoundsOfLostWorkersAndFailsLatePushes) {
  Pushes pushes;
  RoundReducer reducer;
  Replies replies;
  const absl::Time now = absl::FromUnixSeconds(1000);
  EXPECT_FALSE(reducer.Add(pushes.Add(0, 0, 1, {1}), now + absl::Seconds(5), replies.Done(),
                           std::vector<uint32_t>{0, 1}));
  EXPECT_FALSE(reducer.Add(pushes.Add(0, 0, 1, {1}, 0, /*clock=*/4), now - absl::Seconds(1),
                           replies.Done(), std::vector<uint32_t>{0, 1}));
  std::vector<RoundReducer::Round> rounds = reducer.Tick(std::vector<uint32_t>{0}, now);
  ASSERT_EQ(rounds.size(), 1u);
  EXPECT_EQ(rounds[0].clock, 3u);
  ASSERT_EQ(replies.got.size(), 1u);
  EXPECT_EQ(replies.got[0].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(reducer.held(), 0u);
}

TEST(RoundReducerTest, RefusesBadAndOverlappingBlocks) {
  Pushes pushes;
  EXPECT_THAT(RoundReducer::CheckBlock(pushes.Add(0, 0, 3, {1})->header).message(),
              HasSubstr("must have a power-of-two size"));
  EXPECT_THAT(RoundReducer::CheckBlock(pushes.Add(0, 1, 2, {1})->header).message(),
              HasSubstr("start at a multiple of it"));
  EXPECT_TRUE(RoundReducer::CheckBlock(pushes.Add(0, 2, 2, {1})->header).ok());
  RoundReducer reducer;
  Replies replies;
  const std::vector<uint32_t> live = {0, 1};
  EXPECT_FALSE(reducer.Add(pushes.Add(0, 0, 2, {1}), kFar, replies.Done(), live));
  std::optional<RoundReducer::Round> round =
      reducer.Add(pushes.Add(1, 1, 1, {1}), kFar, replies.Done(), live);
  ASSERT_TRUE(round.has_value());
  absl::StatusOr<std::vector<RoundReducer::Sum>> sums = RoundReducer::SumRound(*round);
  EXPECT_EQ(sums.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sums.status().message(), HasSubstr("overlap"));
}

}  // namespace
}  // namespace ps
