// ShardHosts in one process (server/shard_host_fixture.h): which core
// serves workers, replication down a chain, a joining copy, refused
// forwards, dropped shards.
#include "server/replication/shard_host.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/shard_ring.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/membership.pb.h"
#include "proto/replication.pb.h"
#include "server/core/ps_core.h"
#include "server/core/ps_core_test_peer.h"
#include "server/core/request_args.h"
#include "server/replication/shard_host_fixture.h"

namespace ps {
namespace hosttest {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST_F(ShardHostTest, ForWorkerOnlyOnTheUnfencedPrimaryOfAShardInTheRing) {
  Start(0);
  Start(1);
  absl::StatusOr<std::shared_ptr<PsCore>> none = host(0).ForWorker(0);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(none.status().message(), HasSubstr("has not read the ring"));

  SetRing(Ring(1, {{{0, 1}}}), {1, 0});
  absl::StatusOr<std::shared_ptr<PsCore>> replica = host(1).ForWorker(0);
  EXPECT_EQ(replica.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(replica.status().message(),
              HasSubstr("not the primary of shard 0 in ring version 1"));
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
  std::vector<ClockTracker::WorkerLease> leases = PsCoreTestPeer::clocks(*copy).Leases();
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
// built here. The probe that starts server 0's stream 77 of shard 0.
proto::ForwardRequest Probe() {
  proto::ForwardRequest probe;
  probe.set_shard(0);
  probe.set_from_server(0);
  probe.set_from_incarnation(100);
  probe.set_to_incarnation(101);
  probe.set_ring_version(1);
  probe.set_stream_id(77);
  probe.set_probe(true);
  return probe;
}

// The first request of Probe()'s stream: a snapshot of one part, the last,
// at (epoch 1, seq 1), holding table "w" (no rows: all zeros).
proto::ForwardRequest SnapshotOfTheTable() {
  proto::ForwardRequest request = Probe();
  request.set_probe(false);
  request.set_first_seq(1);
  proto::SnapshotPart* last = request.add_entries()->mutable_snapshot();
  last->set_last(true);
  last->mutable_position()->set_epoch(1);
  last->mutable_position()->set_seq(1);
  *last->add_tables() = SumTable().table();
  return request;
}

TEST_F(ShardHostTest, ForwardsAreTakenOnlyFromThePredecessor) {
  Start(1);
  const proto::ForwardRequest probe = Probe();
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
  EXPECT_TRUE(CallForward(host(1), probe).ok());
}

// The race of docs/experiments/2026-11-27-forward-race.md: the ring makes
// this copy the primary while its predecessor's batch is being applied. The
// entries after the copy's epoch start must be refused, not taken for ones
// it holds: an OK reply tells the sender the whole batch is at the tail.
// Each try promotes the copy once the batch has begun to apply; the batch
// is long, so the promotion lands inside it in nearly every try (asserted:
// in at least one of them).
TEST_F(ShardHostTest, ACopyPromotedDuringABatchRefusesTheRestOfIt) {
  constexpr int kEntries = 2000;
  constexpr int kTries = 5;
  int promoted_inside = 0;
  for (int t = 0; t < kTries; ++t) {
    Start(1);
    host(1).SetRing(Ring(1, {{{0, 1}}}));
    ASSERT_TRUE(CallForward(host(1), Probe()).ok());
    const proto::ForwardRequest snapshot = SnapshotOfTheTable();
    ASSERT_TRUE(CallForward(host(1), snapshot).ok());
    std::shared_ptr<PsCore> copy = OnlyCore(1);
    ASSERT_NE(copy, nullptr);

    proto::ForwardRequest batch = snapshot;
    batch.clear_entries();
    batch.set_first_seq(2);
    const float grads[kWidth] = {-1.0f, -1.0f};
    for (int i = 0; i < kEntries; ++i) {
      proto::ForwardEntry* entry = batch.add_entries();
      entry->set_epoch(1);
      entry->set_seq(2 + i);
      proto::PushRequest* p = entry->mutable_push();
      p->set_table("w");
      p->set_worker_id(1);
      p->set_request_id(1000 + i);
      p->add_ranges()->set_end(1);
      p->set_values(std::string(reinterpret_cast<const char*>(grads), sizeof grads));
    }
    absl::StatusOr<proto::ForwardResponse> reply;
    std::thread sender([&] { reply = CallForward(host(1), batch); });
    // The batch has begun to apply (a bounded spin, not a sleep).
    const absl::Time give_up = absl::Now() + kWait;
    while (Values(*copy)[0] < 1.0f && absl::Now() < give_up) std::this_thread::yield();
    host(1).SetRing(Ring(2, {{{1}}}));  // server 0 gone: this copy is the primary
    sender.join();
    const float applied = Values(*copy)[0];
    if (reply.ok()) {
      EXPECT_EQ(applied, kEntries) << "an OK reply: every entry of the batch is here";
      continue;
    }
    ++promoted_inside;
    EXPECT_EQ(reply.status().code(), absl::StatusCode::kFailedPrecondition) << reply.status();
    EXPECT_THAT(reply.status().message(), HasSubstr("this copy is the shard's primary"));
    EXPECT_LT(applied, kEntries);
  }
  EXPECT_GT(promoted_inside, 0) << "the promotion never landed inside the batch";
}

TEST_F(ShardHostTest, ForwardsApplyInSequenceEachOnce) {
  Start(1);
  host(1).SetRing(Ring(1, {{{0, 1}}, {{2}}}));
  const proto::ForwardRequest probe = Probe();
  proto::ForwardRequest request = SnapshotOfTheTable();
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
  absl::StatusOr<proto::ForwardResponse> refused = CallForward(host(1), empty);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("is behind this complete copy"));
  EXPECT_EQ(Values(*OnlyCore(1))[0], 1.0f) << "the copy is kept";
}

TEST_F(ShardHostTest, LeavingTheChainDropsTheShard) {
  std::shared_ptr<PsCore> primary = StartChainOfTwo();
  ASSERT_NE(primary, nullptr);
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
}  // namespace hosttest
}  // namespace ps
