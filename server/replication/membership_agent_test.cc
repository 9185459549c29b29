// The fence of a server that cannot renew its etcd lease, with the store
// made unavailable (MemoryKvStore) and the other server's answers faked:
// fenced when cut off alone, serving on when etcd is down for everyone.
#include "server/replication/membership_agent.h"

#include "absl/synchronization/mutex.h"
#include "common/cluster_keys.h"
#include "common/memory_kv_store.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

constexpr absl::Duration kLease = absl::Seconds(1);

proto::EtcdContactResponse Contact(bool answered) {
  proto::EtcdContactResponse r;
  r.set_last_call_answered(answered);
  r.set_millis_since_answer(answered ? 10 : 5000);
  return r;
}

TEST(EtcdDownEverywhereTest, OnlyWhenEveryOtherServerAnswersAndNoneReachesEtcd) {
  const absl::Duration silent = absl::Seconds(1);
  EXPECT_TRUE(EtcdDownEverywhere({}, silent));
  EXPECT_TRUE(EtcdDownEverywhere({Contact(false), Contact(false)}, silent));
  EXPECT_FALSE(EtcdDownEverywhere({Contact(false), Contact(true)}, silent));
  EXPECT_FALSE(EtcdDownEverywhere({Contact(false), absl::UnavailableError("cut off")}, silent));
  // etcd stopped: the peer's calls hang, so its last call that ended was
  // answered, but long ago.
  proto::EtcdContactResponse hanging = Contact(true);
  hanging.set_millis_since_answer(1500);
  EXPECT_TRUE(EtcdDownEverywhere({Contact(false), hanging}, silent));
  hanging.set_millis_since_answer(200);
  EXPECT_FALSE(EtcdDownEverywhere({Contact(false), hanging}, silent));
}

// Server 1, as server 0 sees it: it answers EtcdContact as told, and takes
// no forwarded update (the ring below has none to send).
class FakePeer final : public ForwardTransport {
 public:
  void Set(absl::StatusOr<proto::EtcdContactResponse> answer) {
    absl::MutexLock lock(&mu_);
    answer_ = std::move(answer);
  }
  absl::StatusOr<proto::ForwardResponse> Forward(const std::string&, const proto::ForwardRequest&,
                                                 absl::Duration) override {
    return absl::UnavailableError("no forwards in this test");
  }
  absl::StatusOr<proto::EtcdContactResponse> EtcdContact(const std::string& address,
                                                         absl::Duration) override {
    absl::MutexLock lock(&mu_);
    return answer_;
  }

 private:
  absl::Mutex mu_;
  absl::StatusOr<proto::EtcdContactResponse> answer_ ABSL_GUARDED_BY(mu_) = Contact(true);
};

class FenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Server 1 registered by the test, under a lease long enough for it.
    absl::StatusOr<int64_t> lease = kv_.GrantLease(absl::Minutes(5));
    ASSERT_TRUE(lease.ok());
    proto::MemberRecord one;
    one.set_server_id(1);
    one.set_address("peer1");
    one.set_incarnation(11);
    ASSERT_TRUE(kv_.Put(MemberKey("c", 1), ToJson(one), *lease).ok());
    ShardHostOptions host;
    host.server_id = 0;
    host.incarnation = 10;
    host.transport = &peer_;
    host_ = std::make_unique<ShardHost>(host);
    MembershipOptions m;
    m.kv = &kv_;
    m.cluster = "c";
    m.server_id = 0;
    m.incarnation = 10;
    m.address = "self0";
    m.num_shards = 2;
    m.replicas = 1;
    m.lease = kLease;
    m.peers = &peer_;
    absl::StatusOr<std::unique_ptr<MembershipAgent>> agent = MembershipAgent::Start(m, host_.get());
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = *std::move(agent);
    ASSERT_TRUE(Until([&] { return host_->ForWorker(0).ok(); })) << "server 0 never served";
  }
  void TearDown() override {
    if (agent_) agent_->Stop(false);
  }

  // Polls `cond` every 10 ms for at most 5 s.
  template <typename F>
  static bool Until(F cond) {
    for (int i = 0; i < 500; ++i) {
      if (cond()) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  MemoryKvStore kv_;
  FakePeer peer_;
  std::unique_ptr<ShardHost> host_;
  std::unique_ptr<MembershipAgent> agent_;
};

TEST_F(FenceTest, CutOffAloneFromEtcdFences) {
  peer_.Set(Contact(true));  // server 1 still reaches etcd
  kv_.SetUnavailable(true);
  EXPECT_TRUE(Until([&] { return host_->fenced(); }));
  EXPECT_EQ(host_->ForWorker(0).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(FenceTest, AnUnreachableServerFences) {
  peer_.Set(absl::UnavailableError("cut off"));
  kv_.SetUnavailable(true);
  EXPECT_TRUE(Until([&] { return host_->fenced(); }));
  kv_.SetUnavailable(false);  // the lease expired meanwhile: registers again
  EXPECT_TRUE(Until([&] { return !host_->fenced(); }));
}

TEST_F(FenceTest, EtcdDownForEveryoneServesOn) {
  peer_.Set(Contact(false));  // server 1 cannot reach etcd either
  kv_.SetUnavailable(true);
  // Two lease lengths, watched every 10 ms: never fenced.
  int fenced = 0;
  for (int i = 0; i < 200; ++i) {
    fenced += host_->fenced();
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(fenced, 0);
  EXPECT_TRUE(host_->ForWorker(0).ok());
  // Server 1 reaches etcd again while this one still cannot: fenced.
  peer_.Set(Contact(true));
  EXPECT_TRUE(Until([&] { return host_->fenced(); }));
}

}  // namespace
}  // namespace ps
