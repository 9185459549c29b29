// The fence of a server that cannot renew its etcd lease, with the store
// made unavailable (MemoryKvStore) and the other server's answers faked:
// fenced when cut off alone, serving on when etcd is down for everyone. And
// the manager after an etcd stall that lapsed another server's lease but not
// its own: it waits for the other to register again.
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

// Server 0 (incarnation 10) of cluster "c": its shard host, and its agent's
// options (2 shards, the test's lease) over `kv`, asking `peer`.
ShardHostOptions HostOptions(ForwardTransport* peer) {
  ShardHostOptions host;
  host.server_id = 0;
  host.incarnation = 10;
  host.transport = peer;
  return host;
}

MembershipOptions AgentOptions(KvStore* kv, ForwardTransport* peer, int replicas) {
  MembershipOptions m;
  m.kv = kv;
  m.cluster = "c";
  m.server_id = 0;
  m.incarnation = 10;
  m.address = "self0";
  m.num_shards = 2;
  m.replicas = replicas;
  m.lease = kLease;
  m.peers = peer;
  return m;
}

// Polls `cond` every 10 ms for at most 5 s.
template <typename F>
bool Until(F cond) {
  for (int i = 0; i < 500; ++i) {
    if (cond()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

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
    host_ = std::make_unique<ShardHost>(HostOptions(&peer_));
    absl::StatusOr<std::unique_ptr<MembershipAgent>> agent =
        MembershipAgent::Start(AgentOptions(&kv_, &peer_, /*replicas=*/1), host_.get());
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = *std::move(agent);
    ASSERT_TRUE(Until([&] { return host_->ForWorker(0).ok(); })) << "server 0 never served";
  }
  void TearDown() override {
    if (agent_) agent_->Stop(false);
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

// A store that stalls like a SIGSTOPped etcd: calls block until it wakes.
// Leases are granted long in the store below, so a renewal that hung through
// the stall is answered (etcd may renew one lease on waking while it expires
// another); the test lapses the other server's lease itself.
class StallableKv final : public KvStore {
 public:
  explicit StallableKv(KvStore* inner) : inner_(inner) {}
  void Stall(bool on) {
    absl::MutexLock lock(&mu_);
    stalled_ = on;
  }
  absl::StatusOr<int64_t> GrantLease(absl::Duration) override {
    Gate();
    return inner_->GrantLease(absl::Minutes(5));
  }
  absl::Status KeepAlive(int64_t lease) override {
    Gate();
    return inner_->KeepAlive(lease);
  }
  absl::Status RevokeLease(int64_t lease) override {
    Gate();
    return inner_->RevokeLease(lease);
  }
  absl::StatusOr<KvRange> Get(std::string_view key) override {
    Gate();
    return inner_->Get(key);
  }
  absl::StatusOr<KvRange> GetPrefix(std::string_view prefix) override {
    Gate();
    return inner_->GetPrefix(prefix);
  }
  absl::StatusOr<int64_t> Put(std::string_view key, std::string_view value,
                              int64_t lease) override {
    Gate();
    return inner_->Put(key, value, lease);
  }
  absl::Status Delete(std::string_view key) override {
    Gate();
    return inner_->Delete(key);
  }
  absl::StatusOr<bool> Txn(const std::vector<KvCompare>& compares,
                           const std::vector<KvOp>& ops) override {
    Gate();
    return inner_->Txn(compares, ops);
  }
  absl::StatusOr<bool> WaitForChange(std::string_view prefix, int64_t after_revision,
                                     absl::Time deadline) override {
    Gate();
    return inner_->WaitForChange(prefix, after_revision, deadline);
  }

 private:
  void Gate() {
    absl::MutexLock lock(&mu_);
    auto awake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !stalled_; };
    mu_.Await(absl::Condition(&awake));
  }

  KvStore* const inner_;
  absl::Mutex mu_;
  bool stalled_ ABSL_GUARDED_BY(mu_) = false;
};

// Server 0 manages a ring of servers 0 and 1 (r = 2). etcd stalls for 1.5
// leases; server 1's lease lapses in it, server 0's renewal hangs through it
// and is answered. Server 1 registers again half a lease after etcd wakes:
// the manager must not have dropped it meanwhile (it used to, at once: the
// renewal was sent before the stall, so no gap was seen).
TEST(StallTest, TheManagerWaitsForServersWhoseLeasesLapsedInAStall) {
  MemoryKvStore inner;
  StallableKv kv(&inner);
  FakePeer peer;
  int64_t one_lease = 0;
  auto register_one = [&]() -> absl::Status {
    absl::StatusOr<int64_t> lease = inner.GrantLease(absl::Minutes(5));
    if (!lease.ok()) return lease.status();
    proto::MemberRecord one;
    one.set_server_id(1);
    one.set_address("peer1");
    one.set_incarnation(11);
    absl::StatusOr<int64_t> put = inner.Put(MemberKey("c", 1), ToJson(one), *lease);
    if (put.ok()) one_lease = *lease;
    return put.status();
  };
  ASSERT_TRUE(register_one().ok());
  ShardHost host(HostOptions(&peer));
  absl::StatusOr<std::unique_ptr<MembershipAgent>> agent =
      MembershipAgent::Start(AgentOptions(&kv, &peer, /*replicas=*/2), &host);
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto version = [&] { return host.ring() ? host.ring()->version() : 0; };
  ASSERT_TRUE(Until([&] { return version() == 1; })) << "no first ring";
  const std::string before = host.ring()->Describe();

  kv.Stall(true);
  ASSERT_TRUE(inner.RevokeLease(one_lease).ok());  // server 1's lease lapses
  absl::SleepFor(kLease * 3 / 2);                  // the fault's length
  kv.Stall(false);
  // Watched every 10 ms for half a lease, then server 1 is back, then
  // watched for two leases more: the ring never changes.
  int changed = 0;
  for (int i = 0; i < 50; ++i, absl::SleepFor(absl::Milliseconds(10))) changed += version() != 1;
  EXPECT_EQ(changed, 0) << "the manager dropped server 1 before it could register again: "
                        << host.ring()->Describe();
  ASSERT_TRUE(register_one().ok());
  for (int i = 0; i < 200; ++i, absl::SleepFor(absl::Milliseconds(10))) changed += version() != 1;
  EXPECT_EQ(changed, 0) << host.ring()->Describe();
  EXPECT_EQ(host.ring()->Describe(), before);
  (*agent)->Stop(false);
}

}  // namespace
}  // namespace ps
