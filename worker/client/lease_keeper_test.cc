// LeaseKeeper without sockets: heartbeats go to a fake transport that
// records them. The clock is fake and never advanced, so the renewal thread
// never fires and the heartbeats seen are exactly those of Start, Leave and
// WaitForWorkers.
#include "worker/client/lease_keeper.h"

#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/client/call_runner.h"
#include "worker/client/fake_transport.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

struct Beat {
  int server = 0;
  proto::HeartbeatRequest request;
};

class LeaseKeeperTest : public ::testing::Test {
 protected:
  LeaseKeeperTest() : transport_(2) {
    transport_.on_heartbeat = [this](int server, const proto::HeartbeatRequest& request, absl::Time,
                                     proto::HeartbeatResponse* reply, Transport::Done done) {
      absl::Status status;
      {
        absl::MutexLock lock(&mu_);
        beats_.push_back({server, request});
        reply->set_live_workers(live_[server]);
        status = refusal_[server];
      }
      clock_.Advance(advance_per_beat_);
      done(status);
    };
  }

  LeaseKeeper::Options Lease(absl::Duration lease) {
    LeaseKeeper::Options options;
    options.worker_id = 3;
    options.lease = lease;
    options.incarnation = 77;
    return options;
  }
  std::vector<Beat> Beats() {
    absl::MutexLock lock(&mu_);
    return beats_;
  }

  FakeClock clock_;
  FakeTransport transport_;
  CallRunner runner_{&transport_, &clock_, "lease_keeper_test"};
  absl::Duration advance_per_beat_ = absl::ZeroDuration();
  absl::Mutex mu_;
  std::vector<Beat> beats_ ABSL_GUARDED_BY(mu_);
  int live_[2] ABSL_GUARDED_BY(mu_) = {1, 1};
  absl::Status refusal_[2] ABSL_GUARDED_BY(mu_);
};

TEST_F(LeaseKeeperTest, StartRegistersEverywhereAndLeaveSaysGoodbyeOnce) {
  LeaseKeeper keeper(Lease(absl::Seconds(8)), &transport_, &runner_, &clock_);
  ASSERT_TRUE(keeper.Start().ok());
  std::vector<Beat> beats = Beats();
  ASSERT_EQ(beats.size(), 2u);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(beats[s].server, s);
    EXPECT_EQ(beats[s].request.worker_id(), 3u);
    EXPECT_EQ(beats[s].request.lease_ms(), 8000u);
    EXPECT_EQ(beats[s].request.incarnation(), 77u);
    EXPECT_EQ(beats[s].request.clock(), 0u);
    EXPECT_FALSE(beats[s].request.leaving());
  }
  keeper.NotePushed(4);
  keeper.NotePushed(2);  // an older round does not move the clock back
  keeper.Leave();
  beats = Beats();
  ASSERT_EQ(beats.size(), 4u);
  for (int i = 2; i < 4; ++i) {
    EXPECT_TRUE(beats[i].request.leaving());
    EXPECT_EQ(beats[i].request.clock(), 5u) << "rounds pushed: 0 .. 4";
  }
  keeper.Leave();
  EXPECT_EQ(Beats().size(), 4u) << "Leave is idempotent";
}

TEST_F(LeaseKeeperTest, AnotherProcessWithThisIdGetsNoLeavingHeartbeat) {
  {
    absl::MutexLock lock(&mu_);
    refusal_[1] = absl::AlreadyExistsError("worker 3 is held by another process");
  }
  {
    LeaseKeeper keeper(Lease(absl::Seconds(8)), &transport_, &runner_, &clock_);
    const absl::Status status = keeper.Start();
    EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
    EXPECT_THAT(status.message(), HasSubstr("server 1 (fake)"));
  }  // the destructor leaves: nothing to send
  EXPECT_EQ(Beats().size(), 2u);
}

TEST_F(LeaseKeeperTest, WithoutALeaseNothingIsSent) {
  LeaseKeeper keeper(Lease(absl::ZeroDuration()), &transport_, &runner_, &clock_);
  EXPECT_TRUE(keeper.Start().ok());
  EXPECT_EQ(keeper.WaitForWorkers(1, absl::Seconds(1)).code(),
            absl::StatusCode::kFailedPrecondition);
  keeper.Leave();
  EXPECT_TRUE(Beats().empty());
}

TEST_F(LeaseKeeperTest, WaitForWorkersWantsEveryServerToCountThem) {
  {
    absl::MutexLock lock(&mu_);
    live_[0] = 3;
    live_[1] = 2;
  }
  LeaseKeeper keeper(Lease(absl::Seconds(8)), &transport_, &runner_, &clock_);
  EXPECT_TRUE(keeper.WaitForWorkers(2, absl::Seconds(1)).ok());
  EXPECT_EQ(Beats().size(), 2u);
  // Each heartbeat takes a second of fake time: one round passes the
  // deadline, and the smallest count is reported.
  advance_per_beat_ = absl::Seconds(1);
  const absl::Status status = keeper.WaitForWorkers(3, absl::Seconds(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(status.message(), HasSubstr("only 2 of 3 workers"));
}

}  // namespace
}  // namespace ps
