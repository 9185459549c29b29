#include "common/shard_ring.h"

#include "gtest/gtest.h"

namespace ps {
namespace {

std::map<uint32_t, proto::MemberRecord> Members(std::initializer_list<uint32_t> ids,
                                                uint64_t incarnation = 7) {
  std::map<uint32_t, proto::MemberRecord> out;
  for (uint32_t id : ids) {
    proto::MemberRecord m;
    m.set_server_id(id);
    m.set_address("127.0.0.1:" + std::to_string(9000 + id));
    m.set_incarnation(incarnation + id);
    out[id] = m;
  }
  return out;
}

std::vector<uint32_t> Servers(const proto::RingRecord& r, int shard) {
  return {r.shards(shard).servers().begin(), r.shards(shard).servers().end()};
}
std::vector<uint32_t> Joining(const proto::RingRecord& r, int shard) {
  return {r.shards(shard).joining().begin(), r.shards(shard).joining().end()};
}

TEST(ShardRingTest, InitialChainsFollowTheRing) {
  auto ring = ShardRing::Initial(3, 2, Members({0, 1, 2}));
  ASSERT_TRUE(ring.ok()) << ring.status();
  EXPECT_EQ(ring->version(), 1u);
  EXPECT_EQ(Servers(ring->record(), 0), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(Servers(ring->record(), 2), (std::vector<uint32_t>{2, 0}));
  EXPECT_EQ(ring->Primary(1), 1u);
  EXPECT_EQ(ring->Successor(1, 1), 2u);
  EXPECT_EQ(ring->Successor(1, 2), std::nullopt);
  EXPECT_EQ(ring->Successor(1, 0), std::nullopt);
  EXPECT_EQ(ring->Address(2), "127.0.0.1:9002");
  EXPECT_FALSE(ShardRing::Initial(3, 2, Members({0, 2})).ok());
  // More logical shards than servers: 8 shards on 3 servers, r = 2.
  auto many = ShardRing::Initial(8, 2, Members({0, 1, 2}));
  ASSERT_TRUE(many.ok()) << many.status();
  EXPECT_EQ(Servers(many->record(), 5), (std::vector<uint32_t>{2, 0}));
  EXPECT_EQ(Servers(many->record(), 7), (std::vector<uint32_t>{1, 2}));
  // r larger than the cluster: every server, once.
  auto all = ShardRing::Initial(2, 5, Members({0, 1}));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(Servers(all->record(), 1), (std::vector<uint32_t>{1, 0}));
}

// A server stopped cleanly keeping its copies on disk (returning): while it
// is away its place in those chains is kept (the primary moves on, nobody
// joins for it); once live again, under a new incarnation, it joins them
// first, before a less loaded or lower numbered server.
TEST(ShardRingTest, AReturningServersPlaceIsKeptAndItJoinsFirst) {
  auto ring = ShardRing::Initial(3, 2, Members({0, 1, 2}));
  ASSERT_TRUE(ring.ok());
  RingInputs in;
  in.live = Members({0, 2});
  in.returning = {{0, 1}, {1, 1}};  // server 1 kept shards 0 and 1
  auto away = NextRing(ring->record(), in);
  ASSERT_TRUE(away.has_value());
  EXPECT_EQ(Servers(*away, 0), (std::vector<uint32_t>{0}));
  EXPECT_EQ(Servers(*away, 1), (std::vector<uint32_t>{2}));  // promoted
  EXPECT_TRUE(Joining(*away, 0).empty());
  EXPECT_TRUE(Joining(*away, 1).empty());
  EXPECT_FALSE(away->members().contains(1));
  // Without the record, the other live servers join at once.
  RingInputs gone = in;
  gone.returning.clear();
  auto replaced = NextRing(ring->record(), gone);
  ASSERT_TRUE(replaced.has_value());
  EXPECT_EQ(Joining(*replaced, 0), (std::vector<uint32_t>{2}));

  // Back as a new process: it joins both chains.
  in.live[1] = Members({1}, 50)[1];
  auto back = NextRing(*away, in);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(Joining(*back, 0), (std::vector<uint32_t>{1}));
  EXPECT_EQ(Joining(*back, 1), (std::vector<uint32_t>{1}));

  // 4 servers; 3 returns for shard 0 and is the first to join it, though
  // server 1 holds no more shards and has the lower id.
  auto four = ShardRing::Initial(2, 2, Members({0, 1, 2, 3}));
  ASSERT_TRUE(four.ok());
  proto::RingRecord record = four->record();
  record.mutable_shards(0)->clear_servers();
  record.mutable_shards(0)->add_servers(0);
  record.mutable_shards(0)->add_servers(3);
  RingInputs four_in;
  four_in.live = Members({0, 1, 2});
  four_in.returning = {{0, 3}};
  auto kept = NextRing(record, four_in);
  ASSERT_TRUE(kept.has_value());
  EXPECT_TRUE(Joining(*kept, 0).empty());
  four_in.live[3] = Members({3}, 70)[3];
  auto first = NextRing(*kept, four_in);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(Joining(*first, 0), (std::vector<uint32_t>{3}));
}

// Every server of a chain away (stopped cleanly), one back under a new
// incarnation with the copy the ring's incarnation of it kept: the chain
// resumes from that copy (that server alone, resumed_from naming the
// incarnation), instead of waiting for the others or being lost. A copy
// kept by another incarnation does not count.
TEST(ShardRingTest, AChainAllAwayResumesFromAKeptCopyOfTheNamedIncarnation) {
  auto ring = ShardRing::Initial(2, 2, Members({0, 1}));
  ASSERT_TRUE(ring.ok());
  RingInputs in;
  in.live[1] = Members({1}, 50)[1];
  (*in.live[1].mutable_kept())[0] = ring->record().members().at(1).incarnation();
  (*in.live[1].mutable_kept())[1] = 99;  // another process's copy of shard 1
  auto next = NextRing(ring->record(), in);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(Servers(*next, 0), (std::vector<uint32_t>{1}));
  EXPECT_EQ(next->shards(0).resumed_from(), ring->record().members().at(1).incarnation());
  EXPECT_EQ(next->members().at(1).incarnation(), 51u);
  EXPECT_TRUE(next->members().at(1).kept().empty());
  // Shard 1 waits for server 0, which may come back with its copy.
  EXPECT_EQ(Servers(*next, 1), (std::vector<uint32_t>{0}));
  EXPECT_EQ(next->shards(1).resumed_from(), 0u);
  auto described = ShardRing::FromRecord(*next);
  ASSERT_TRUE(described.ok());
  EXPECT_NE(described->Describe().find("shard 0: 1 [resumed from a kept copy]"), std::string::npos)
      << described->Describe();
}

TEST(ShardRingTest, RejectsBadRecords) {
  auto ring = ShardRing::Initial(2, 2, Members({0, 1}));
  ASSERT_TRUE(ring.ok());
  proto::RingRecord twice = ring->record();
  twice.mutable_shards(0)->add_joining(0);
  EXPECT_FALSE(ShardRing::FromRecord(twice).ok());
  proto::RingRecord unnamed = ring->record();
  unnamed.mutable_shards(0)->add_joining(5);
  EXPECT_FALSE(ShardRing::FromRecord(unnamed).ok());
}

TEST(ShardRingTest, DeadPrimaryIsReplacedByItsSuccessorAndAReplicaJoins) {
  auto ring = ShardRing::Initial(3, 2, Members({0, 1, 2}));
  ASSERT_TRUE(ring.ok());
  RingInputs in;
  in.live = Members({1, 2});
  auto next = NextRing(ring->record(), in);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->version(), 2u);
  EXPECT_EQ(Servers(*next, 0), (std::vector<uint32_t>{1}));  // promoted
  EXPECT_EQ(Servers(*next, 2), (std::vector<uint32_t>{2}));
  EXPECT_EQ(Servers(*next, 1), (std::vector<uint32_t>{1, 2}));
  // Each short chain gets the other live server as a joining copy.
  EXPECT_EQ(Joining(*next, 0), (std::vector<uint32_t>{2}));
  EXPECT_EQ(Joining(*next, 2), (std::vector<uint32_t>{1}));
  EXPECT_FALSE(next->members().contains(0));
  // Nothing more happens until the copies finish.
  EXPECT_FALSE(NextRing(*next, in).has_value());
  in.synced[{0, 2}] = in.live[2].incarnation();
  auto joined = NextRing(*next, in);
  ASSERT_TRUE(joined.has_value());
  EXPECT_EQ(Servers(*joined, 0), (std::vector<uint32_t>{1, 2}));
  EXPECT_TRUE(Joining(*joined, 0).empty());
  EXPECT_EQ(Joining(*joined, 2), (std::vector<uint32_t>{1}));
  auto view = ShardRing::FromRecord(*joined);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->Successor(2, 2), 1u);  // the tail feeds the joining copy
}

TEST(ShardRingTest, ARestartedServerHoldsNothingAndRejoins) {
  auto ring = ShardRing::Initial(2, 2, Members({0, 1}));
  ASSERT_TRUE(ring.ok());
  RingInputs in;
  in.live = Members({0});
  in.live[1] = Members({1}, 100)[1];  // same id, new incarnation
  auto next = NextRing(ring->record(), in);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(Servers(*next, 1), (std::vector<uint32_t>{0}));
  EXPECT_EQ(Joining(*next, 1), (std::vector<uint32_t>{1}));
  EXPECT_EQ(Joining(*next, 0), (std::vector<uint32_t>{1}));
  EXPECT_EQ(next->members().at(1).incarnation(), in.live[1].incarnation());
  // A synced record of the old incarnation does not count.
  in.synced[{1, 1}] = 8;
  auto again = NextRing(*next, in);
  EXPECT_FALSE(again.has_value());
}

// Every server of shard 1's chain (r = 1: server 1) gone from etcd: its
// lease may have lapsed (an etcd stall, a pause) with its copy intact, so
// the chain waits for it; only a restart (another incarnation) loses it.
TEST(ShardRingTest, AChainWaitsForLapsedServersAndIsLostOnlyWhenTheyRestarted) {
  auto ring = ShardRing::Initial(3, 1, Members({0, 1, 2}));
  ASSERT_TRUE(ring.ok());
  RingInputs in;
  in.live = Members({0, 2});
  EXPECT_FALSE(NextRing(ring->record(), in).has_value()) << "nothing to change: it may come back";

  in.live = Members({0, 1, 2});
  in.live[1].set_incarnation(99);  // restarted: its copy is gone
  auto next = NextRing(ring->record(), in);
  ASSERT_TRUE(next.has_value());
  EXPECT_TRUE(Servers(*next, 1).empty());
  auto view = ShardRing::FromRecord(*next);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->Primary(1), std::nullopt);
  EXPECT_NE(view->Describe().find("shard 1: LOST"), std::string::npos);
}

// The same loss in a cluster that keeps checkpoints (rebuild_lost): the
// chain is rebuilt at once over the least loaded live servers, marked to
// load the newest checkpoint at the new version; a chain that may come
// back is not.
TEST(ShardRingTest, ALostChainIsRebuiltFromTheCheckpointWhenTheClusterKeepsThem) {
  auto ring = ShardRing::Initial(3, 2, Members({0, 1, 2}), /*restore=*/false);
  ASSERT_TRUE(ring.ok());
  EXPECT_EQ(ring->record().shards(0).restored_at(), 0u);
  RingInputs in;
  in.rebuild_lost = true;
  in.live = Members({2});
  auto waiting = NextRing(ring->record(), in);  // 0 and 1 lapsed: shard 0 waits for them
  ASSERT_TRUE(waiting.has_value());
  EXPECT_EQ(Servers(*waiting, 0), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(waiting->shards(0).restored_at(), 0u);

  in.live = Members({0, 1, 2});
  in.live[0].set_incarnation(90);  // both of shard 0's servers restarted
  in.live[1].set_incarnation(91);
  auto next = NextRing(ring->record(), in);
  ASSERT_TRUE(next.has_value());
  ASSERT_EQ(Servers(*next, 0).size(), 1u) << "one server loads the checkpoint";
  ASSERT_EQ(Joining(*next, 0).size(), 1u) << "the other copies it from that one";
  EXPECT_NE(Servers(*next, 0)[0], Joining(*next, 0)[0]);
  EXPECT_EQ(next->shards(0).restored_at(), ring->version() + 1);
  EXPECT_EQ(next->shards(1).restored_at(), 0u) << "shard 1 kept server 2's copy";
  for (uint32_t s : {Servers(*next, 0)[0], Joining(*next, 0)[0]}) {
    EXPECT_EQ(next->members().at(s).incarnation(), in.live.at(s).incarnation());
  }
  auto view = ShardRing::FromRecord(*next);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->Describe().find("LOST"), std::string::npos) << view->Describe();
  EXPECT_NE(view->Describe().find("[from checkpoint at v2]"), std::string::npos);

  auto restored = ShardRing::Initial(2, 2, Members({0, 1}), /*restore=*/true);
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(restored->record().shards(1).restored_at(), 1u);
  EXPECT_EQ(Servers(restored->record(), 1), (std::vector<uint32_t>{1}));
  EXPECT_EQ(Joining(restored->record(), 1), (std::vector<uint32_t>{0}));
}

// r = 2, an etcd stall: every lease lapsed, and the servers register again
// one at a time, under the same incarnations. No chain is emptied, none
// gets a joining copy from a server that is not back, and once all are
// back the ring is as it was.
TEST(ShardRingTest, AStallThatLapsesEveryLeaseEmptiesNoChain) {
  auto ring = ShardRing::Initial(3, 2, Members({0, 1, 2}));
  ASSERT_TRUE(ring.ok());
  RingInputs in;
  in.live = Members({});
  EXPECT_FALSE(NextRing(ring->record(), in).has_value());
  in.live = Members({0});
  auto next = NextRing(ring->record(), in);
  ASSERT_TRUE(next.has_value());
  // Shard 0 (0, 1) and shard 2 (2, 0) fail over to server 0; shard 1's
  // chain (1, 2) has no live server and waits.
  EXPECT_EQ(Servers(*next, 0), (std::vector<uint32_t>{0}));
  EXPECT_EQ(Servers(*next, 1), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(Servers(*next, 2), (std::vector<uint32_t>{0}));
  EXPECT_TRUE(Joining(*next, 1).empty());
  EXPECT_EQ(next->members().at(1).incarnation(), 8u) << "kept with the incarnation it had";
  auto view = ShardRing::FromRecord(*next);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->Describe().find("LOST"), std::string::npos) << view->Describe();
  // Server 2 comes back (same incarnation): it is primary of shard 1.
  in.live = Members({0, 2});
  auto later = NextRing(*next, in);
  ASSERT_TRUE(later.has_value());
  EXPECT_EQ(Servers(*later, 1), (std::vector<uint32_t>{2}));
}

// Server 1 does not acknowledge server 0's forwards for shard 0 (a
// partition between the two; both live in etcd): reported stuck, it leaves
// that chain, and is not chosen to copy it again while the report lasts.
TEST(ShardRingTest, AServerReportedStuckLeavesThatChain) {
  auto ring = ShardRing::Initial(3, 2, Members({0, 1, 2}));
  ASSERT_TRUE(ring.ok());
  RingInputs in;
  in.live = Members({0, 1, 2});
  in.stuck[{0, 1}] = 99;  // another process of server 1: stale, ignored
  EXPECT_FALSE(NextRing(ring->record(), in).has_value());
  in.stuck[{0, 1}] = 8;  // the process the ring names
  auto next = NextRing(ring->record(), in);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(Servers(*next, 0), (std::vector<uint32_t>{0}));
  EXPECT_EQ(Joining(*next, 0), (std::vector<uint32_t>{2})) << "a copy from another server";
  EXPECT_EQ(Servers(*next, 1), (std::vector<uint32_t>{1, 2})) << "other chains keep it";
  // The only live server of a chain is never taken out.
  in.live = Members({1});
  in.stuck.clear();
  in.stuck[{1, 1}] = 8;
  auto alone = NextRing(ring->record(), in);
  ASSERT_TRUE(alone.has_value());
  EXPECT_EQ(Servers(*alone, 1), (std::vector<uint32_t>{1}));
}

TEST(ShardRingTest, DrainCopiesFirstThenLeaves) {
  auto ring = ShardRing::Initial(3, 2, Members({0, 1, 2, 3}));
  ASSERT_TRUE(ring.ok());
  RingInputs in;
  in.live = Members({0, 1, 2, 3});
  in.draining = {0};
  auto next = NextRing(ring->record(), in);
  ASSERT_TRUE(next.has_value());
  // Server 0 stays until the replacement copies.
  EXPECT_EQ(Servers(*next, 0), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(Joining(*next, 0), (std::vector<uint32_t>{3}));
  EXPECT_EQ(Joining(*next, 2), (std::vector<uint32_t>{3}));
  in.synced[{0, 3}] = in.live[3].incarnation();
  in.synced[{2, 3}] = in.live[3].incarnation();
  auto done = NextRing(*next, in);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(Servers(*done, 0), (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(Servers(*done, 2), (std::vector<uint32_t>{2, 3}));
  EXPECT_FALSE(done->members().contains(0));
}

TEST(ShardRingTest, AddedServerTakesShardsFromTheMostLoaded) {
  auto ring = ShardRing::Initial(4, 1, Members({0, 1, 2, 3}));
  ASSERT_TRUE(ring.ok());
  // Server 3 died; server 0 got its shard; then server 4 is added.
  proto::RingRecord r = ring->record();
  r.mutable_shards(3)->set_servers(0, 0);
  r.mutable_members()->erase(3);
  RingInputs in;
  in.live = Members({0, 1, 2, 4});
  in.adding = {4};
  auto next = NextRing(r, in);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(Joining(*next, 0), (std::vector<uint32_t>{4}));
  in.synced[{0, 4}] = in.live[4].incarnation();
  auto moved = NextRing(*next, in);
  ASSERT_TRUE(moved.has_value());
  // Server 4 joined and server 0, over r and the most loaded, left.
  EXPECT_EQ(Servers(*moved, 0), (std::vector<uint32_t>{4}));
  EXPECT_EQ(Servers(*moved, 3), (std::vector<uint32_t>{0}));
  EXPECT_FALSE(NextRing(*moved, in).has_value());
}

}  // namespace
}  // namespace ps
