// ShardHosts in one process, chained by an in-memory ForwardTransport that
// calls the target host's Forward directly: which core serves workers,
// replication down a chain, a joining copy, refused forwards, dropped
// shards. No sockets; waits are bounded, never sleeps.
#include "server/shard_host.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/shard_ring.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/membership.pb.h"
#include "proto/replication.pb.h"
#include "server/ps_core.h"
#include "server/request_args.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr absl::Duration kWait = absl::Seconds(20);
constexpr uint64_t kKeys = 16;
constexpr uint32_t kWidth = 2;

std::string Address(uint32_t server) { return absl::StrCat("h", server); }

// host.Forward, waited for (bounded) as a blocking transport call.
absl::StatusOr<proto::ForwardResponse> CallForward(ShardHost& host,
                                                   const proto::ForwardRequest& request,
                                                   absl::Duration timeout = kWait) {
  struct Answer {
    absl::Notification done;
    absl::Status status;
    proto::ForwardResponse response;
  };
  auto answer = std::make_shared<Answer>();  // the callback may outlive a timed-out wait
  host.Forward(request, [answer](absl::Status s, proto::ForwardResponse r) {
    answer->status = std::move(s);
    answer->response = std::move(r);
    answer->done.Notify();
  });
  if (!answer->done.WaitForNotificationWithTimeout(timeout)) {
    return absl::DeadlineExceededError("ShardHost::Forward did not answer");
  }
  if (!answer->status.ok()) return answer->status;
  return answer->response;
}

// Address -> host. Counts the snapshot parts sent to each address.
class InMemoryTransport final : public ForwardTransport {
 public:
  // A host replaced or cleared is released outside the lock (its links
  // may be calling Forward).
  void Add(const std::string& address, std::shared_ptr<ShardHost> host) {
    absl::MutexLock lock(&mu_);
    host.swap(hosts_[address]);
  }
  void Clear() {
    std::map<std::string, std::shared_ptr<ShardHost>> hosts;
    absl::MutexLock lock(&mu_);
    hosts.swap(hosts_);
  }
  int snapshot_parts(const std::string& address) const {
    absl::MutexLock lock(&mu_);
    auto it = snapshot_parts_.find(address);
    return it == snapshot_parts_.end() ? 0 : it->second;
  }

  absl::StatusOr<proto::ForwardResponse> Forward(const std::string& address,
                                                 const proto::ForwardRequest& request,
                                                 absl::Duration timeout) override {
    std::shared_ptr<ShardHost> host;
    {
      absl::MutexLock lock(&mu_);
      auto it = hosts_.find(address);
      if (it == hosts_.end() || it->second == nullptr) {
        return absl::UnavailableError(absl::StrCat("no host at ", address));
      }
      host = it->second;
      for (const auto& e : request.entries()) snapshot_parts_[address] += e.has_snapshot();
    }
    return CallForward(*host, request, timeout);
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<ShardHost>> hosts_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> snapshot_parts_ ABSL_GUARDED_BY(mu_);
};

struct Chain {
  std::vector<uint32_t> servers;
  std::vector<uint32_t> joining;
};

// A ring of one chain per shard; members are the servers named, at "h<id>",
// incarnation 100 + id unless given.
std::shared_ptr<const ShardRing> Ring(uint64_t version, const std::vector<Chain>& chains,
                                      std::map<uint32_t, uint64_t> incarnations = {}) {
  proto::RingRecord record;
  record.set_version(version);
  record.set_replicas(2);
  auto member = [&](uint32_t s) {
    proto::MemberRecord& m = (*record.mutable_members())[s];
    m.set_server_id(s);
    m.set_address(Address(s));
    m.set_incarnation(incarnations.count(s) ? incarnations[s] : 100 + s);
  };
  for (const Chain& c : chains) {
    proto::ShardChain* chain = record.add_shards();
    for (uint32_t s : c.servers) chain->add_servers(s), member(s);
    for (uint32_t s : c.joining) chain->add_joining(s), member(s);
  }
  absl::StatusOr<ShardRing> ring = ShardRing::FromRecord(record);
  EXPECT_TRUE(ring.ok()) << ring.status();
  return std::make_shared<const ShardRing>(*std::move(ring));
}

proto::CreateTableRequest SumTable() {
  proto::CreateTableRequest req;
  proto::TableDef* def = req.mutable_table();
  def->set_name("w");
  def->set_num_keys(kKeys);
  def->set_width(kWidth);
  def->set_initializer(proto::INIT_ZEROS);
  def->set_optimizer(proto::OPT_SGD);
  def->set_learning_rate(1.0f);
  return req;
}

// Waits (bounded) until every update applied on `core` so far is at the tail.
absl::Status Replicated(PsCore& core) {
  auto result = std::make_shared<std::pair<absl::Notification, absl::Status>>();
  core.AfterReplicated([result](absl::Status s) {
    result->second = std::move(s);
    result->first.Notify();
  });
  if (!result->first.WaitForNotificationWithTimeout(kWait)) {
    return absl::DeadlineExceededError("AfterReplicated did not run");
  }
  return result->second;
}

absl::Status CreateTable(PsCore& core) {
  if (absl::Status s = core.CreateTable(SumTable()).status(); !s.ok()) return s;
  return Replicated(core);
}

// A push of every key (distinct values per key and request) by worker 1,
// at clock request_id, then its replication; the push's status, else the
// replication's.
absl::Status Push(PsCore& core, uint64_t request_id) {
  proto::PushRequest req;
  req.set_table("w");
  req.set_worker_id(1);
  req.set_request_id(request_id);
  req.set_clock(request_id);
  req.add_ranges()->set_end(kKeys);
  std::vector<float> grads(kKeys * kWidth);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = -static_cast<float>(request_id * (i + 1));
  req.set_values(std::string(reinterpret_cast<const char*>(grads.data()),
                             grads.size() * sizeof(float)));
  PushArgs args;
  if (absl::Status s = DecodePush(req, &core.key_lists(), &args); !s.ok()) return s;
  absl::Status pushed = absl::DeadlineExceededError("an async push completes inside Push");
  core.Push(&args, absl::InfiniteFuture(),
            [&pushed](absl::StatusOr<proto::PushResponse> r) { pushed = r.status(); });
  if (!pushed.ok()) return pushed;
  return Replicated(core);
}

// "table/worker=clock" for each worker clock the core keeps.
std::vector<std::string> WorkerClocks(PsCore& core) {
  std::vector<std::string> out;
  for (const ClockTracker::WorkerClock& c : core.clocks().Clocks(UINT64_MAX)) {
    out.push_back(absl::StrCat(c.table, "/", c.worker, "=", c.clock));
  }
  return out;
}

std::vector<float> Values(PsCore& core) {
  std::string bytes;
  absl::StatusOr<uint64_t> read = core.store().Pull("w", KeySpec::Single(0, kKeys), &bytes);
  EXPECT_TRUE(read.ok()) << read.status();
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

class ShardHostTest : public ::testing::Test {
 protected:
  ~ShardHostTest() override {
    transport_.Clear();
    for (auto& host : hosts_) host.reset();  // predecessors first
  }

  // (Re)starts server `id` at "h<id>", serving one shard in all, as
  // process `incarnation` (0: 100 + id, as Ring names it by default).
  ShardHost& Start(uint32_t id, uint64_t incarnation = 0) {
    ShardHostOptions options;
    options.core.num_servers = 1;
    options.server_id = id;
    options.incarnation = incarnation != 0 ? incarnation : 100 + id;
    options.transport = &transport_;
    options.on_synced = [this, id](int shard) {
      absl::MutexLock lock(&mu_);
      synced_[id].push_back(shard);
    };
    options.stuck_after = stuck_after_;
    options.on_successor_stuck = [this](int shard, uint32_t server, uint64_t incarnation,
                                        const absl::Status&) {
      absl::MutexLock lock(&mu_);
      stuck_.push_back(absl::StrCat("shard ", shard, ": server ", server, "/", incarnation));
    };
    hosts_[id] = std::make_shared<ShardHost>(options);
    transport_.Add(Address(id), hosts_[id]);
    return *hosts_[id];
  }
  ShardHost& host(uint32_t id) { return *hosts_[id]; }
  // Rings go to the hosts tail first, as a watch might deliver them.
  void SetRing(const std::shared_ptr<const ShardRing>& ring, std::vector<uint32_t> order) {
    for (uint32_t id : order) hosts_[id]->SetRing(ring);
  }
  std::shared_ptr<PsCore> Primary(uint32_t id) {
    absl::StatusOr<std::shared_ptr<PsCore>> core = hosts_[id]->ForWorker(0);
    EXPECT_TRUE(core.ok()) << core.status();
    return core.ok() ? *core : nullptr;
  }
  // The one core held by host `id`.
  std::shared_ptr<PsCore> OnlyCore(uint32_t id) {
    std::vector<std::shared_ptr<PsCore>> cores = hosts_[id]->Cores();
    EXPECT_EQ(cores.size(), 1u);
    return cores.empty() ? nullptr : cores[0];
  }
  // Whether host `id` reported `shard` synced within kWait.
  bool WaitSynced(uint32_t id, int shard) {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return std::find(synced_[id].begin(), synced_[id].end(), shard) != synced_[id].end();
    };
    return mu_.AwaitWithTimeout(absl::Condition(&done), kWait);
  }
  std::vector<int> synced(uint32_t id) {
    absl::MutexLock lock(&mu_);
    return synced_[id];
  }

  absl::Duration stuck_after_ = absl::ZeroDuration();  // for hosts started after it is set
  absl::Mutex mu_;
  std::array<std::vector<int>, 3> synced_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> stuck_ ABSL_GUARDED_BY(mu_);  // on_successor_stuck's reports
  InMemoryTransport transport_;
  std::array<std::shared_ptr<ShardHost>, 3> hosts_;  // after what they use
};

TEST_F(ShardHostTest, ForWorkerOnlyOnTheUnfencedPrimaryOfAShardInTheRing) {
  Start(0);
  Start(1);
  absl::StatusOr<std::shared_ptr<PsCore>> none = host(0).ForWorker(0);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(none.status().message(), HasSubstr("has not read the ring"));

  SetRing(Ring(1, {{{0, 1}}}), {1, 0});
  absl::StatusOr<std::shared_ptr<PsCore>> replica = host(1).ForWorker(0);
  EXPECT_EQ(replica.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(replica.status().message(), HasSubstr("not the primary of shard 0 in ring version 1"));
  EXPECT_THAT(replica.status().message(), HasSubstr("server 0 at h0"));
  EXPECT_EQ(host(0).ForWorker(1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(host(0).ForWorker(-1).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_NE(Primary(0), nullptr);

  host(0).SetFenced(true);
  absl::StatusOr<std::shared_ptr<PsCore>> fenced = host(0).ForWorker(0);
  EXPECT_EQ(fenced.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(fenced.status().message(), HasSubstr("fenced"));
  host(0).SetFenced(false);
  EXPECT_TRUE(host(0).ForWorker(0).ok());
}

// Chain 0 -> 1 -> 2: a write is acknowledged once the tail applied it.
TEST_F(ShardHostTest, WritesReachTheTailBeforeTheyAreAcknowledged) {
  for (uint32_t id : {0, 1, 2}) Start(id);
  SetRing(Ring(1, {{{0, 1, 2}}}), {2, 1, 0});
  std::shared_ptr<PsCore> primary = Primary(0);
  ASSERT_NE(primary, nullptr);
  ASSERT_TRUE(CreateTable(*primary).ok());
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(Push(*primary, id).ok());

  const std::vector<float> expected = Values(*primary);
  EXPECT_EQ(expected[1], 2.0f * (1 + 2 + 3)) << "key 0, column 1: -grad summed";
  for (uint32_t id : {1, 2}) {
    std::shared_ptr<PsCore> copy = OnlyCore(id);
    ASSERT_NE(copy, nullptr);
    EXPECT_EQ(Values(*copy), expected) << "server " << id;
    EXPECT_THAT(host(id).CompleteShards(), ElementsAre(0));
  }
  ReplicaLink::Stats stats = host(0).LinkStats();
  EXPECT_EQ(stats.snapshots, 0u) << "the first ring's copies are empty alike: no snapshot";
  EXPECT_EQ(stats.catch_ups, 1u);
  EXPECT_GE(stats.entries_sent, 3u);
  EXPECT_EQ(stats.pending, 0u);
  // The shard's own link, as the Stats RPC reports it; none for a shard
  // not held.
  std::optional<ReplicaLink::Stats> shard0 = host(0).LinkStats(0);
  ASSERT_TRUE(shard0.has_value());
  EXPECT_EQ(shard0->entries_sent, stats.entries_sent);
  EXPECT_FALSE(host(0).LinkStats(1).has_value());
  EXPECT_THAT(synced(1), IsEmpty()) << "in the chain from the start: nothing to report";
}

// A server joining a chain copies the shard by a snapshot, reports it, and
// receives the updates after it; joining the chain later needs no new copy.
TEST_F(ShardHostTest, JoiningServerCopiesTheShardThenFollowsTheStream) {
  Start(0);
  Start(1);
  SetRing(Ring(1, {{{0}}}), {1, 0});
  std::shared_ptr<PsCore> primary = Primary(0);
  ASSERT_NE(primary, nullptr);
  ASSERT_TRUE(CreateTable(*primary).ok());
  ASSERT_TRUE(Push(*primary, 1).ok());
  ASSERT_TRUE(Push(*primary, 2).ok());
  proto::HeartbeatRequest hb;  // worker 5, live, at clock 3
  hb.set_worker_id(5);
  hb.set_clock(3);
  hb.set_lease_ms(60000);
  hb.set_incarnation(55);
  ASSERT_TRUE(primary->Heartbeat(hb).ok());
  EXPECT_THAT(host(1).Cores(), IsEmpty());

  SetRing(Ring(2, {{{0}, {1}}}), {1, 0});
  ASSERT_TRUE(WaitSynced(1, 0));
  EXPECT_THAT(host(1).CompleteShards(), ElementsAre(0));
  EXPECT_GE(transport_.snapshot_parts("h1"), 1);
  std::shared_ptr<PsCore> copy = OnlyCore(1);
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(Values(*copy), Values(*primary));
  EXPECT_THAT(WorkerClocks(*copy), ElementsAre("w/1=3")) << "the snapshot carries the clocks";
  // And the live workers' leases: promoted, the copy counts worker 5 in
  // its waits before it calls.
  std::vector<ClockTracker::WorkerLease> leases = copy->clocks().Leases();
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].worker, 5u);
  EXPECT_EQ(leases[0].incarnation, 55u);
  EXPECT_EQ(leases[0].clock, 3u);
  EXPECT_GT(leases[0].remaining, absl::Seconds(30));

  ASSERT_TRUE(Push(*primary, 3).ok());
  EXPECT_EQ(Values(*copy), Values(*primary));

  SetRing(Ring(3, {{{0, 1}}}), {1, 0});
  ASSERT_TRUE(Push(*primary, 4).ok());
  EXPECT_EQ(Values(*copy), Values(*primary));
  EXPECT_EQ(host(0).LinkStats().snapshots, 1u) << "same successor: the stream goes on";
  EXPECT_THAT(synced(1), ElementsAre(0));
  EXPECT_THAT(synced(0), IsEmpty());
}

// Server 1 receiving on its own (no server 0 running): the requests are
// built here.
TEST_F(ShardHostTest, ForwardsAreTakenOnlyFromThePredecessorInSequence) {
  Start(1);
  proto::ForwardRequest probe;
  probe.set_shard(0);
  probe.set_from_server(0);
  probe.set_from_incarnation(100);
  probe.set_to_incarnation(101);
  probe.set_ring_version(1);
  probe.set_stream_id(77);
  probe.set_probe(true);
  EXPECT_EQ(CallForward(host(1), probe).status().code(), absl::StatusCode::kUnavailable)
      << "no ring yet";

  host(1).SetRing(Ring(1, {{{0, 1}}, {{2}}}));
  proto::ForwardRequest stranger = probe;
  stranger.set_from_server(2);
  stranger.set_from_incarnation(102);
  absl::StatusOr<proto::ForwardResponse> refused = CallForward(host(1), stranger);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("not the successor of server 2"));
  stranger.set_from_server(1);
  stranger.set_from_incarnation(101);
  EXPECT_EQ(CallForward(host(1), stranger).status().code(), absl::StatusCode::kFailedPrecondition);
  stranger = probe;
  stranger.set_shard(1);  // server 1 is not in shard 1's chain
  EXPECT_EQ(CallForward(host(1), stranger).status().code(), absl::StatusCode::kFailedPrecondition);
  // Another process of server 0 (it restarted), or a request meant for a
  // process of server 1 before this one.
  stranger = probe;
  stranger.set_from_incarnation(999);
  refused = CallForward(host(1), stranger);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("not the sender's 999"));
  stranger = probe;
  stranger.set_to_incarnation(55);
  refused = CallForward(host(1), stranger);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("not 55"));
  host(1).SetFenced(true);
  EXPECT_EQ(CallForward(host(1), probe).status().code(), absl::StatusCode::kUnavailable);
  host(1).SetFenced(false);

  proto::ForwardRequest request = probe;
  request.set_probe(false);
  request.set_first_seq(1);
  proto::SnapshotPart* last = request.add_entries()->mutable_snapshot();
  last->set_last(true);
  last->mutable_position()->set_epoch(1);
  last->mutable_position()->set_seq(1);
  *last->add_tables() = SumTable().table();
  absl::StatusOr<proto::ForwardResponse> unprobed = CallForward(host(1), request);
  EXPECT_EQ(unprobed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(unprobed.status().message(), HasSubstr("starts with a probe"));

  // The probe: the copy of the first ring is complete and empty.
  absl::StatusOr<proto::ForwardResponse> where = CallForward(host(1), probe);
  ASSERT_TRUE(where.ok()) << where.status();
  EXPECT_TRUE(where->has_copy());
  EXPECT_EQ(where->position().seq(), 0u);

  // The stream: a snapshot, then a push sent twice.
  absl::StatusOr<proto::ForwardResponse> applied = CallForward(host(1), request);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(applied->applied_seq(), 1u);
  proto::ForwardRequest push = request;
  push.set_first_seq(2);
  push.clear_entries();
  proto::ForwardEntry* entry = push.add_entries();
  entry->set_epoch(1);
  entry->set_seq(2);
  proto::PushRequest* p = entry->mutable_push();
  p->set_table("w");
  p->set_worker_id(1);
  p->set_request_id(9);
  p->add_ranges()->set_end(1);
  const float grads[kWidth] = {-1.0f, -2.0f};
  p->set_values(std::string(reinterpret_cast<const char*>(grads), sizeof grads));
  for (int attempt = 0; attempt < 2; ++attempt) {
    applied = CallForward(host(1), push);
    ASSERT_TRUE(applied.ok()) << applied.status();
    EXPECT_EQ(applied->applied_seq(), 2u);
  }
  std::shared_ptr<PsCore> copy = OnlyCore(1);
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(Values(*copy)[0], 1.0f) << "a resent entry applies once";
  EXPECT_EQ(Values(*copy)[1], 2.0f);
  push.set_first_seq(4);
  absl::StatusOr<proto::ForwardResponse> gap = CallForward(host(1), push);
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(gap.status().message(), HasSubstr("entry 4 arrived before 3"));
  // An entry whose place in the history skips one.
  push.set_first_seq(3);
  push.mutable_entries(0)->set_seq(5);
  gap = CallForward(host(1), push);
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(gap.status().message(), HasSubstr("entry at seq 5 arrived after seq 2"));

  // A snapshot behind this complete copy (an empty one, say) is refused.
  where = CallForward(host(1), probe);
  ASSERT_TRUE(where.ok()) << where.status();
  EXPECT_EQ(where->position().seq(), 2u);
  proto::ForwardRequest empty = request;
  empty.mutable_entries(0)->mutable_snapshot()->clear_position();
  refused = CallForward(host(1), empty);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("is behind this complete copy"));
  EXPECT_EQ(Values(*OnlyCore(1))[0], 1.0f) << "the copy is kept";
}

TEST_F(ShardHostTest, LeavingTheChainDropsTheShard) {
  Start(0);
  Start(1);
  SetRing(Ring(1, {{{0, 1}}}), {1, 0});
  std::shared_ptr<PsCore> primary = Primary(0);
  ASSERT_NE(primary, nullptr);
  ASSERT_TRUE(CreateTable(*primary).ok());
  ASSERT_TRUE(Push(*primary, 1).ok());
  EXPECT_EQ(host(1).Cores().size(), 1u);
  EXPECT_THAT(host(1).CompleteShards(), ElementsAre(0));

  SetRing(Ring(2, {{{0}}}), {0, 1});
  EXPECT_THAT(host(1).Cores(), IsEmpty());
  EXPECT_THAT(host(1).CompleteShards(), IsEmpty());
  EXPECT_EQ(host(1).ForWorker(0).status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(Push(*primary, 2).ok()) << "server 0 is the tail now";
  EXPECT_EQ(host(0).LinkStats().pending, 0u);
}

// Regression: a successor was known by (server id, address) only. Server 1
// restarts at the same address (fixed ports: Kubernetes, Compose); in one
// step NextRing drops its old incarnation and adds the new one as joining.
// The old stream must not go on (the new process would refuse it forever):
// the new incarnation gets a snapshot and syncs.
TEST_F(ShardHostTest, RestartedSuccessorAtTheSameAddressGetsASnapshot) {
  Start(0, 10);
  Start(1, 11);
  std::shared_ptr<const ShardRing> first = Ring(1, {{{0, 1}}}, {{0, 10}, {1, 11}});
  SetRing(first, {1, 0});
  std::shared_ptr<PsCore> primary = Primary(0);
  ASSERT_NE(primary, nullptr);
  ASSERT_TRUE(CreateTable(*primary).ok());
  ASSERT_TRUE(Push(*primary, 1).ok());

  hosts_[1].reset();  // the transport still holds it until replaced
  Start(1, 12);
  RingInputs inputs;
  inputs.live[0] = first->record().members().at(0);
  inputs.live[1] = first->record().members().at(1);
  inputs.live[1].set_incarnation(12);
  std::optional<proto::RingRecord> next = NextRing(first->record(), inputs);
  ASSERT_TRUE(next.has_value());
  ASSERT_THAT(next->shards(0).servers(), ElementsAre(0));
  ASSERT_THAT(next->shards(0).joining(), ElementsAre(1));
  absl::StatusOr<ShardRing> second = ShardRing::FromRecord(*next);
  ASSERT_TRUE(second.ok());
  SetRing(std::make_shared<const ShardRing>(*second), {1, 0});

  EXPECT_TRUE(WaitSynced(1, 0)) << "the new process never received a snapshot";
  EXPECT_TRUE(Push(*primary, 2).ok());
}

// Chain 0 -> 1 -> 2 loses its middle: server 0's new successor, server 2,
// holds a complete copy, so it is caught up from server 0's recent history
// (nothing, or the few updates it lacks) instead of being sent a snapshot.
TEST_F(ShardHostTest, ARepairedChainCatchesUpWithoutASnapshot) {
  for (uint32_t id : {0, 1, 2}) Start(id);
  SetRing(Ring(1, {{{0, 1, 2}}}), {2, 1, 0});
  std::shared_ptr<PsCore> primary = Primary(0);
  ASSERT_NE(primary, nullptr);
  ASSERT_TRUE(CreateTable(*primary).ok());
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(Push(*primary, id).ok());
  transport_.Add(Address(1), nullptr);  // server 1 is gone

  SetRing(Ring(2, {{{0, 2}}}), {2, 0});
  for (uint64_t id = 4; id <= 6; ++id) ASSERT_TRUE(Push(*primary, id).ok());
  EXPECT_EQ(Values(*OnlyCore(2)), Values(*primary));
  EXPECT_EQ(transport_.snapshot_parts("h2"), 0) << "server 2 held a complete copy";
  ReplicaLink::Stats stats = host(0).LinkStats();
  EXPECT_EQ(stats.snapshots, 0u);
  EXPECT_EQ(stats.catch_ups, 2u) << "the first ring's, and the repair's";
}

// A server restarts before the ring drops its previous process (which was
// the primary): the new process serves nothing and sends nothing for the
// ring's entries of the old one, so the complete copy on server 1 stays.
// Regression: the new process took its empty slot for the old one's
// complete copy and sent it down the chain as a snapshot.
TEST_F(ShardHostTest, ARestartedProcessDoesNotActOnItsPredecessorsRingEntries) {
  Start(0);
  Start(1);
  std::shared_ptr<const ShardRing> ring = Ring(1, {{{0, 1}}});
  SetRing(ring, {1, 0});
  std::shared_ptr<PsCore> primary = Primary(0);
  ASSERT_NE(primary, nullptr);
  ASSERT_TRUE(CreateTable(*primary).ok());
  ASSERT_TRUE(Push(*primary, 1).ok());
  const std::vector<float> before = Values(*OnlyCore(1));
  primary.reset();

  hosts_[0].reset();
  Start(0, 200);  // a new process of server 0
  host(0).SetRing(ring);
  absl::StatusOr<std::shared_ptr<PsCore>> refused = host(0).ForWorker(0);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(), HasSubstr("still names its previous process"));
  EXPECT_THAT(host(0).CompleteShards(), IsEmpty());
  EXPECT_EQ(host(0).LinkStats().snapshots, 0u);
  EXPECT_EQ(transport_.snapshot_parts("h1"), 0);
  EXPECT_EQ(Values(*OnlyCore(1)), before) << "server 1's copy is intact";
}

// Server 1 stops answering (a partition between the two servers, both live
// in etcd): server 0's link reports it stuck once, after stuck_after, so
// that the manager takes it out of the chain; the write waits meanwhile.
TEST_F(ShardHostTest, ASuccessorThatAcknowledgesNothingIsReportedStuck) {
  stuck_after_ = absl::Milliseconds(200);
  Start(0);
  Start(1);
  SetRing(Ring(1, {{{0, 1}}}), {1, 0});
  std::shared_ptr<PsCore> primary = Primary(0);
  ASSERT_NE(primary, nullptr);
  ASSERT_TRUE(CreateTable(*primary).ok());
  transport_.Add(Address(1), nullptr);  // unreachable from now on
  ASSERT_TRUE(primary->CreateTable(SumTable()).ok());  // nothing new: not forwarded
  absl::Notification written;
  proto::CreateTableRequest other = SumTable();
  other.mutable_table()->set_name("v");
  ASSERT_TRUE(primary->CreateTable(other).ok());
  primary->AfterReplicated([&](absl::Status) { written.Notify(); });
  {
    absl::MutexLock lock(&mu_);
    auto reported = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !stuck_.empty(); };
    ASSERT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&reported), kWait));
    EXPECT_THAT(stuck_, ElementsAre("shard 0: server 1/101"));
  }
  EXPECT_FALSE(written.HasBeenNotified()) << "not acknowledged without the tail";
  // The manager took server 1 out: server 0 is the tail, the write is done.
  SetRing(Ring(2, {{{0}}}), {0});
  EXPECT_TRUE(written.WaitForNotificationWithTimeout(kWait));
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(stuck_.size(), 1u) << "reported once";
}

// One server holding two shards (r = 1): the memory budget is the
// process's, not each shard's; each shard's bytes are its share of it.
TEST_F(ShardHostTest, OneMemoryBudgetForTheWholeProcess) {
  ShardHostOptions options;
  options.core.num_servers = 2;
  options.core.limits.memory_budget_bytes = 48 << 10;
  options.server_id = 0;
  options.incarnation = 100;
  options.transport = &transport_;
  ShardHost host(options);
  host.SetRing(Ring(1, {{{0}}, {{0}}}));
  proto::CreateTableRequest table = SumTable();
  table.mutable_table()->set_num_keys(8192);  // 2 x 4096-key slices of 2 floats: 32 KiB each
  table.mutable_table()->set_initializer(proto::INIT_ZEROS);
  absl::StatusOr<std::shared_ptr<PsCore>> shard0 = host.ForWorker(0);
  absl::StatusOr<std::shared_ptr<PsCore>> shard1 = host.ForWorker(1);
  ASSERT_TRUE(shard0.ok() && shard1.ok());
  ASSERT_TRUE((*shard0)->CreateTable(table).ok());
  const uint64_t share = (*shard0)->store().bytes_used();
  EXPECT_GT(share, 0u);
  EXPECT_EQ(host.process_budget().used(), share);
  absl::StatusOr<proto::CreateTableResponse> refused = (*shard1)->CreateTable(table);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("--memory_budget_mb"));
  EXPECT_EQ(host.process_budget().used(), share) << "nothing charged for the refused table";
  EXPECT_EQ((*shard1)->store().bytes_used(), 0u);
}

// A sparse table that admits a new key with probability 0.5 and evicts
// the least recently updated rows over a cap: the primary decides, the
// chain carries its decisions, so both copies hold the same rows; and
// after a failover the promoted copy serves the same values.
TEST_F(ShardHostTest, SparseAdmissionAndEvictionAreTheSameOnEveryCopy) {
  Start(0);
  Start(1);
  SetRing(Ring(1, {{{0}}}), {1, 0});
  std::shared_ptr<PsCore> primary = Primary(0);
  ASSERT_NE(primary, nullptr);
  proto::CreateTableRequest create;
  proto::TableDef* def = create.mutable_table();
  def->set_name("s");
  def->set_kind(proto::TABLE_SPARSE);
  def->set_width(2);
  def->set_num_buckets(4);
  def->set_initializer(proto::INIT_ZEROS);
  def->set_optimizer(proto::OPT_SGD);
  def->set_learning_rate(1.0f);
  def->set_admit_probability(0.5f);
  def->set_max_rows(64);
  def->set_eviction(proto::EVICT_LRU);
  ASSERT_TRUE(primary->CreateTable(create).ok());
  ASSERT_TRUE(Replicated(*primary).ok());
  std::vector<uint64_t> all;
  uint64_t state = 12345;
  for (uint64_t request = 1; request <= 40; ++request) {
    if (request == 21) {
      // Server 1 copies the shard half way: its sketch and random draws
      // start afresh, so only the primary's decisions can keep it equal.
      SetRing(Ring(2, {{{0}, {1}}}), {1, 0});
      ASSERT_TRUE(WaitSynced(1, 0));
      SetRing(Ring(3, {{{0, 1}}}), {1, 0});
    }
    proto::PushRequest req;
    req.set_table("s");
    req.set_worker_id(1);
    req.set_request_id(request);
    req.set_clock(request);
    std::vector<uint64_t> keys;
    for (int i = 0; i < 16; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      keys.push_back(state >> 54);  // 1,024 distinct keys: admissions and evictions alike
    }
    all.insert(all.end(), keys.begin(), keys.end());
    std::vector<float> grads(keys.size() * 2, -1.0f);
    req.set_key_list(reinterpret_cast<const char*>(keys.data()), keys.size() * sizeof(uint64_t));
    req.set_values(reinterpret_cast<const char*>(grads.data()), grads.size() * sizeof(float));
    PushArgs args;
    ASSERT_TRUE(DecodePush(req, &primary->key_lists(), &args).ok());
    absl::Status pushed = absl::DeadlineExceededError("not run");
    primary->Push(&args, absl::InfiniteFuture(),
                  [&pushed](absl::StatusOr<proto::PushResponse> r) { pushed = r.status(); });
    ASSERT_TRUE(pushed.ok()) << pushed;
    ASSERT_TRUE(Replicated(*primary).ok());
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  auto read = [&](PsCore& core) {
    std::string bytes;
    absl::StatusOr<uint64_t> r = core.store().Pull("s", KeySpec::List(all), &bytes);
    EXPECT_TRUE(r.ok()) << r.status();
    return bytes;
  };
  auto stats = [&](PsCore& core) {
    proto::TableStats t;
    t.set_table("s");
    EXPECT_TRUE(core.store().FillSparseStats(&t));
    return absl::StrCat("rows ", t.rows(), " admitted ", t.admitted(), " refused ", t.refused(),
                        " evicted ", t.evicted());
  };
  std::shared_ptr<PsCore> copy = OnlyCore(1);
  ASSERT_NE(copy, nullptr);
  const std::string on_primary = stats(*primary);
  EXPECT_THAT(on_primary, Not(HasSubstr("refused 0 "))) << "admission refused some keys";
  EXPECT_THAT(on_primary, Not(HasSubstr("evicted 0"))) << "the cap evicted some rows";
  // The counters count since each copy began; the rows are the same.
  EXPECT_EQ(stats(*copy).substr(0, stats(*copy).find(" admitted")),
            on_primary.substr(0, on_primary.find(" admitted")));
  EXPECT_EQ(read(*copy), read(*primary)) << "the same rows, with the same values";
  // Failover: server 1 alone serves the same rows.
  const std::string before = read(*primary);
  transport_.Add(Address(0), nullptr);
  SetRing(Ring(4, {{{1}}}), {1});
  std::shared_ptr<PsCore> promoted = Primary(1);
  ASSERT_NE(promoted, nullptr);
  EXPECT_EQ(read(*promoted), before);
}

// Regression: a dropped shard's replica (and its link) was freed while a
// caller still held the core, whose next write then used the freed link. A
// held core keeps its replica alive, and its writes fail with UNAVAILABLE.
TEST_F(ShardHostTest, WriteOnACoreHeldAcrossADropFailsInsteadOfUsingAFreedLink) {
  Start(0);
  Start(1);
  SetRing(Ring(1, {{{0, 1}}}), {1, 0});
  std::shared_ptr<PsCore> held = Primary(0);
  ASSERT_NE(held, nullptr);
  ASSERT_TRUE(CreateTable(*held).ok());
  SetRing(Ring(2, {{{1}}}), {1, 0});  // server 0 leaves; 1 is primary
  EXPECT_THAT(host(0).Cores(), IsEmpty());
  EXPECT_EQ(Push(*held, 1).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ps
