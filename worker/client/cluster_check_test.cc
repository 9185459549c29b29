// CheckCluster without sockets: servers answer Info through a fake
// transport.
#include "worker/client/cluster_check.h"

#include <atomic>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/client/fake_transport.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

class ClusterCheckTest : public ::testing::Test {
 protected:
  ClusterCheckTest() : transport_(2) {
    expected_.placement = {/*slice_size=*/64, /*virtual_nodes=*/16};
    expected_.timeout = absl::Seconds(2);
    expected_.max_attempts = 3;
    expected_.retry_backoff = absl::Milliseconds(50);
    transport_.on_info = [this](int server, const proto::InfoRequest&, absl::Time deadline,
                                proto::InfoResponse* reply, Transport::Done done) {
      ++calls_[server];
      if (server == 0 && hang_first_ > 0) {
        // A dead primary: the call waits until its deadline.
        --hang_first_;
        deadlines_.push_back(deadline);
        return done(absl::DeadlineExceededError("Deadline Exceeded"));
      }
      if (server == 1 && unavailable_first_ > 0) {
        --unavailable_first_;
        return done(absl::UnavailableError("no ring yet"));
      }
      reply->set_server_index(server);
      reply->set_num_servers(2);
      reply->set_slice_size(64);
      reply->set_virtual_nodes(16);
      reply->set_dedup_retention_ms(retention_ms_);
      if (server == 1) reply->set_server_index(index_of_1_);
      done(absl::OkStatus());
    };
  }

  FakeClock clock_;
  FakeTransport transport_;
  ClusterExpectation expected_;
  std::atomic<int> calls_[2] = {0, 0};
  int unavailable_first_ = 0;
  int hang_first_ = 0;
  std::vector<absl::Time> deadlines_;  // of the calls to server 0 that hung
  uint32_t index_of_1_ = 1;
  uint64_t retention_ms_ = 120'000;
};

TEST_F(ClusterCheckTest, AcceptsTheExpectedRing) {
  EXPECT_TRUE(CheckCluster(&transport_, &clock_, expected_).ok());
  EXPECT_EQ(calls_[0], 1);
  EXPECT_EQ(calls_[1], 1);
}

TEST_F(ClusterCheckTest, RefusesAServerInAnotherPlace) {
  index_of_1_ = 0;
  const absl::Status status = CheckCluster(&transport_, &clock_, expected_);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("server 1 (fake) reports shard 0 of 2"));
  EXPECT_THAT(status.message(), HasSubstr("--servers"));
}

TEST_F(ClusterCheckTest, RefusesARetentionShorterThanTheRetryWindow) {
  // 3 attempts of 2 s and backoffs of 50 and 100 ms: 6.15 s.
  retention_ms_ = 6'150;
  absl::Status status = CheckCluster(&transport_, &clock_, expected_);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("--dedup_retention_seconds"));
  EXPECT_THAT(status.message(), HasSubstr("6.15s"));
  retention_ms_ = 6'151;
  EXPECT_TRUE(CheckCluster(&transport_, &clock_, expected_).ok());
  retention_ms_ = 0;  // a server that does not say
  EXPECT_TRUE(CheckCluster(&transport_, &clock_, expected_).ok());
}

TEST_F(ClusterCheckTest, AServerThatDoesNotAnswerIsNamed) {
  unavailable_first_ = 1;
  const absl::Status status = CheckCluster(&transport_, &clock_, expected_);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("server 1 (fake) did not answer within 30s"));
  EXPECT_EQ(calls_[1], 1) << "without replication UNAVAILABLE is final";
}

TEST_F(ClusterCheckTest, AReplicatedClusterIsAskedAgainUntilItHasARing) {
  unavailable_first_ = 2;
  expected_.replicated = true;
  // The check waits kMaxBackoff between rounds, on a real clock here.
  EXPECT_TRUE(CheckCluster(&transport_, Clock::Real(), expected_).ok());
  EXPECT_EQ(calls_[0], 1);
  EXPECT_EQ(calls_[1], 3);
}

// A replicated shard whose primary is dead (its lease not expired yet): each
// attempt is bounded, and the next one reaches the primary of the ring then.
TEST_F(ClusterCheckTest, AReplicatedClustersDeadPrimaryIsAskedAgainNotWaitedOnForTheDeadline) {
  hang_first_ = 2;
  expected_.replicated = true;
  const absl::Time start = Clock::Real()->Now();
  EXPECT_TRUE(CheckCluster(&transport_, Clock::Real(), expected_).ok());
  EXPECT_EQ(calls_[0], 3);
  ASSERT_EQ(deadlines_.size(), 2u);
  EXPECT_LE(deadlines_[0] - start, absl::Seconds(3)) << "an attempt waits for the whole deadline";
  // Without replication the one attempt has the whole connect timeout.
  hang_first_ = 1;
  expected_.replicated = false;
  deadlines_.clear();
  EXPECT_EQ(CheckCluster(&transport_, &clock_, expected_).code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_EQ(deadlines_.size(), 1u);
  EXPECT_GE(deadlines_[0] - clock_.Now(), absl::Seconds(29));
}

}  // namespace
}  // namespace ps
