// ShardHosts through failures and limits (server/shard_host_fixture.h): a
// chain repaired without a snapshot, a restarted process, a successor that
// acknowledges nothing, one memory budget per process, sparse decisions
// carried down the chain.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/ps.pb.h"
#include "server/core/ps_core.h"
#include "server/core/ps_core_test_peer.h"
#include "server/core/request_args.h"
#include "server/replication/shard_host.h"
#include "server/replication/shard_host_fixture.h"
#include "server/store/memory_budget.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace hosttest {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

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
  std::shared_ptr<PsCore> primary = StartChainOfTwo();
  ASSERT_NE(primary, nullptr);
  transport_.Add(Address(1), nullptr);                 // unreachable from now on
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
  const uint64_t share = (*shard0)->bytes_used();
  EXPECT_GT(share, 0u);
  // The table, and the links' recent entries (r = 2: each shard keeps a
  // history, charged to the same budget): an epoch start and the creation.
  const uint64_t used = host.process_budget().used();
  EXPECT_GE(used, share);
  EXPECT_LT(used - share, 1024u);
  absl::StatusOr<proto::CreateTableResponse> refused = (*shard1)->CreateTable(table);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("--memory_budget_mb"));
  EXPECT_EQ(host.process_budget().used(), used) << "nothing charged for the refused table";
  EXPECT_EQ((*shard1)->bytes_used(), 0u);
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
  proto::TableDef def = SparseSumTable("s", /*width=*/2, /*num_buckets=*/4);
  def.set_admit_probability(0.5f);
  def.set_max_rows(64);
  def.set_eviction(proto::EVICT_LRU);
  ASSERT_TRUE(primary->CreateTable(CreateTableRequestFor(def)).ok());
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
    absl::StatusOr<uint64_t> r = PsCoreTestPeer::store(core).Pull("s", KeySpec::List(all), &bytes);
    EXPECT_TRUE(r.ok()) << r.status();
    return bytes;
  };
  auto stats = [&](PsCore& core) {
    proto::TableStats t;
    t.set_table("s");
    EXPECT_TRUE(PsCoreTestPeer::store(core).FillSparseStats(&t));
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

}  // namespace
}  // namespace hosttest
}  // namespace ps
