// Tiered tables (rows mostly on disk) on replicated servers: every copy of
// a chain holds the values of the same table kept in memory, bit for bit,
// through demotions; a joining server copies it by a snapshot (the cache's
// rows and the disk's); after a failover the new primary goes on; each
// copy's directory is its own and goes with it.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/core/ps_core.h"
#include "server/core/ps_core_test_peer.h"
#include "server/core/request_args.h"
#include "server/replication/shard_host_fixture.h"
#include "server/store/shard_store.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace hosttest {
namespace {

// Width 4, AdaGrad, 16 buckets; tiered: a 1 MiB cache (about 16,000 rows).
proto::TableDef Emb(bool tiered) {
  proto::TableDef def = SparseTableDef("emb", /*width=*/4, /*num_buckets=*/16);
  def = WithUniformInit(def, -0.1f, 0.1f, /*seed=*/3);
  def = WithAdagrad(def, /*learning_rate=*/0.05f, /*initial_accumulator=*/0.1f);
  if (tiered) {
    def.set_storage(proto::STORAGE_TIERED);
    def.set_cache_mb(1);
  }
  return def;
}

std::vector<uint64_t> Keys() {
  std::vector<uint64_t> keys;
  for (uint64_t i = 0; i < 40000; ++i) keys.push_back(i * 0x9e3779b97f4a7c15ULL + 1);
  return keys;
}

// Gradients of one push: varying by key and request.
std::vector<float> Grads(const std::vector<uint64_t>& keys, uint64_t request_id) {
  std::vector<float> g;
  for (uint64_t k : keys) {
    for (int c = 0; c < 4; ++c) {
      g.push_back(0.01f * static_cast<float>((k * 31 + request_id * 7 + c) % 13) - 0.06f);
    }
  }
  return g;
}

// Every key pushed once, in requests of 4,000 keys from *request_id on, to
// the primary `core` (replicated before it returns) and to `memory`.
void PushRound(PsCore& core, ShardStore& memory, const std::vector<uint64_t>& keys,
               uint64_t* request_id) {
  for (size_t b = 0; b < keys.size(); b += 4000) {
    const std::vector<uint64_t> part(keys.begin() + b, keys.begin() + b + 4000);
    const uint64_t id = ++*request_id;
    const std::vector<float> grads = Grads(part, id);
    proto::PushRequest req;
    req.set_table("emb");
    req.set_worker_id(1);
    req.set_request_id(id);
    req.set_clock(id);
    req.set_key_list(std::string(reinterpret_cast<const char*>(part.data()), part.size() * 8));
    req.set_values(std::string(reinterpret_cast<const char*>(grads.data()), grads.size() * 4));
    PushArgs args;
    ASSERT_TRUE(DecodePush(req, &core.key_lists(), &args).ok());
    absl::Status pushed = absl::DeadlineExceededError("an async push completes inside Push");
    core.Push(&args, absl::InfiniteFuture(),
              [&pushed](absl::StatusOr<proto::PushResponse> r) { pushed = r.status(); });
    ASSERT_TRUE(pushed.ok()) << pushed;
    ASSERT_TRUE(Replicated(core).ok());
    ASSERT_TRUE(
        memory
            .Push("emb", KeySpec::List(part), grads, id, [] { return absl::StatusOr<bool>(true); })
            .ok());
  }
}

std::string Read(ShardStore& store, const std::vector<uint64_t>& keys) {
  std::string bytes;
  absl::StatusOr<uint64_t> read = store.Pull("emb", KeySpec::List(keys), &bytes);
  EXPECT_TRUE(read.ok()) << read.status();
  return bytes;
}

uint64_t Demoted(PsCore& core) {
  proto::TableStats stats;
  stats.set_table("emb");
  EXPECT_TRUE(PsCoreTestPeer::store(core).FillSparseStats(&stats));
  return stats.demoted();
}

// The scratch directories of tiered tables under host `id`'s table_dir.
std::vector<std::string> Directories(const std::string& root, uint32_t id) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(absl::StrCat(root, "/h", id), ec)) {
    names.push_back(e.path().filename().string());
  }
  return names;
}

TEST_F(ShardHostTest, TieredTablesReplicateCopyBySnapshotAndFailOver) {
  table_dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/tiers");
  Start(0);
  Start(1);
  SetRing(Ring(1, {{{0, 1}}}), {1, 0});
  std::shared_ptr<PsCore> primary = Primary(0);
  ASSERT_NE(primary, nullptr);
  ASSERT_TRUE(primary->CreateTable(CreateTableRequestFor(Emb(true))).ok());
  ASSERT_TRUE(Replicated(*primary).ok());
  ShardStore memory(0, Placement(1));
  ASSERT_TRUE(memory.CreateTable(Emb(false)).ok());
  const std::vector<uint64_t> keys = Keys();
  uint64_t request_id = 0;
  for (int round = 0; round < 2; ++round) PushRound(*primary, memory, keys, &request_id);
  const std::string want = Read(memory, keys);
  std::shared_ptr<PsCore> copy = OnlyCore(1);
  ASSERT_NE(copy, nullptr);
  EXPECT_GT(Demoted(*primary), 0u);
  EXPECT_GT(Demoted(*copy), 0u);
  EXPECT_EQ(Read(PsCoreTestPeer::store(*primary), keys), want) << "the primary";
  EXPECT_EQ(Read(PsCoreTestPeer::store(*copy), keys), want) << "the copy";
  ASSERT_EQ(Directories(table_dir_, 1).size(), 1u);

  // Server 2 joins: a snapshot of the cache's rows and the disk's.
  Start(2);
  SetRing(Ring(2, {{{0, 1}, {2}}}), {2, 1, 0});
  ASSERT_TRUE(WaitSynced(2, 0));
  EXPECT_GE(transport_.snapshot_parts("h2"), 1);
  SetRing(Ring(3, {{{0, 1, 2}}}), {2, 1, 0});
  std::shared_ptr<PsCore> joined = OnlyCore(2);
  ASSERT_NE(joined, nullptr);
  EXPECT_EQ(Read(PsCoreTestPeer::store(*joined), keys), want) << "the joined copy";

  // Server 0 fails: 1 is the primary and goes on with 2.
  SetRing(Ring(4, {{{1, 2}}}), {2, 1, 0});
  EXPECT_TRUE(host(0).Cores().empty());
  primary.reset();  // the test's hold on the dropped core
  EXPECT_TRUE(Directories(table_dir_, 0).empty()) << "a dropped copy's directory stays";
  std::shared_ptr<PsCore> promoted = Primary(1);
  ASSERT_NE(promoted, nullptr);
  PushRound(*promoted, memory, keys, &request_id);
  const std::string after = Read(memory, keys);
  EXPECT_EQ(Read(PsCoreTestPeer::store(*promoted), keys), after) << "the new primary";
  EXPECT_EQ(Read(PsCoreTestPeer::store(*joined), keys), after) << "the new tail";
}

class KeptCopyTest : public ShardHostTest {
 protected:
  // Servers 0 -> 1 (ring 1) with table "emb" (tiered or not) created on the
  // primary, which is returned (null, with a test failure, when it fails),
  // and in memory_; two rounds of every key pushed to both.
  std::shared_ptr<PsCore> StartChainWithEmb(bool tiered) {
    Start(0);
    Start(1);
    SetRing(Ring(1, {{{0, 1}}}), {1, 0});
    std::shared_ptr<PsCore> primary = Primary(0);
    if (primary == nullptr) return nullptr;
    const bool created = primary->CreateTable(CreateTableRequestFor(Emb(tiered))).ok() &&
                         Replicated(*primary).ok() && memory_.CreateTable(Emb(false)).ok();
    EXPECT_TRUE(created);
    if (!created) return nullptr;
    for (int round = 0; round < 2; ++round) PushRound(*primary, memory_, keys_, &request_id_);
    return primary;
  }
  // Server 1 stops cleanly, keeping its copy; the manager takes it out of
  // the chain and a round is pushed to `primary`; it starts again (process
  // 201), offers the copy and joins with it. Whether it synced.
  bool StopPushAndRejoin(PsCore& primary) {
    EXPECT_EQ(StopCleanly(1), std::vector<int>{0});
    SetRing(Ring(2, {{{0}}}), {0});
    PushRound(primary, memory_, keys_, &request_id_);
    Start(1, 201);
    EXPECT_EQ(host(1).OfferedShards(), std::vector<int>{0});
    SetRing(Ring(3, {{{0}, {1}}}, {{1, 201}}), {1, 0});
    return WaitSynced(1, 0);
  }

  ShardStore memory_{0, Placement(1)};
  const std::vector<uint64_t> keys_ = Keys();
  uint64_t request_id_ = 0;
};

// A server stopped cleanly keeps its copy of a shard whose tables are all
// tiered; its next process offers it when a ring makes it join the chain
// again, and the predecessor sends only what was pushed meanwhile: no
// snapshot, and every copy holds the values of the table kept in memory,
// through a failover to the rejoined copy.
TEST_F(KeptCopyTest, AServerStoppedCleanlyRejoinsWithItsKeptCopy) {
  table_dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/kept");
  std::shared_ptr<PsCore> primary = StartChainWithEmb(true);
  ASSERT_NE(primary, nullptr);
  EXPECT_GT(Demoted(*OnlyCore(1)), 0u);
  const uint64_t catch_ups = host(0).LinkStats(0)->catch_ups;
  ASSERT_TRUE(StopPushAndRejoin(*primary));
  EXPECT_EQ(transport_.snapshot_parts("h1"), 0) << "the kept copy was replaced by a snapshot";
  EXPECT_EQ(host(0).LinkStats(0)->catch_ups, catch_ups + 1);
  EXPECT_TRUE(host(1).OfferedShards().empty());
  SetRing(Ring(4, {{{0, 1}}}, {{1, 201}}), {1, 0});
  PushRound(*primary, memory_, keys_, &request_id_);
  std::string want = Read(memory_, keys_);
  std::shared_ptr<PsCore> rejoined = OnlyCore(1);
  ASSERT_NE(rejoined, nullptr);
  EXPECT_EQ(Read(PsCoreTestPeer::store(*rejoined), keys_), want) << "the rejoined copy";
  // Its directory is the new process's own: one, the earlier one renamed.
  const std::vector<std::string> dirs = Directories(table_dir_, 1);
  ASSERT_EQ(dirs.size(), 1u);
  EXPECT_NE(dirs[0].find(".id1-201-"), std::string::npos) << dirs[0];

  // Server 0 fails: the rejoined copy is the primary and goes on.
  SetRing(Ring(5, {{{1}}}, {{1, 201}}), {1, 0});
  primary.reset();
  std::shared_ptr<PsCore> promoted = Primary(1);
  ASSERT_NE(promoted, nullptr);
  PushRound(*promoted, memory_, keys_, &request_id_);
  want = Read(memory_, keys_);
  EXPECT_EQ(Read(PsCoreTestPeer::store(*promoted), keys_), want) << "the promoted copy";
}

// A kept copy the predecessor's history no longer reaches back to is
// replaced by a snapshot (and its directory with it); the values are exact.
TEST_F(KeptCopyTest, AKeptCopyPastThePredecessorsHistoryIsSentASnapshot) {
  table_dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/kept_behind");
  history_bytes_ = 64 << 10;  // less than a round of pushes
  std::shared_ptr<PsCore> primary = StartChainWithEmb(true);
  ASSERT_NE(primary, nullptr);
  const uint64_t catch_ups = host(0).LinkStats(0)->catch_ups;
  ASSERT_TRUE(StopPushAndRejoin(*primary));
  EXPECT_GE(transport_.snapshot_parts("h1"), 1);
  EXPECT_EQ(host(0).LinkStats(0)->catch_ups, catch_ups);
  SetRing(Ring(4, {{{0, 1}}}, {{1, 201}}), {1, 0});
  std::shared_ptr<PsCore> copy = OnlyCore(1);
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(Read(PsCoreTestPeer::store(*copy), keys_), Read(memory_, keys_));
  EXPECT_EQ(Directories(table_dir_, 1).size(), 1u) << "the kept copy's directory stays";
}

// Both servers of the chain stopped cleanly: the ring resumes the chain
// from server 1's kept copy (resumed_from: the process that held it), which
// serves as primary, exact; server 0 comes back and joins with its own kept
// copy, caught up without a snapshot. A member of a chain resumed from
// another process's copy serves nothing (not an empty copy).
TEST_F(KeptCopyTest, AChainWhoseServersAllStoppedResumesFromAKeptCopy) {
  table_dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/kept_resumed");
  std::shared_ptr<PsCore> primary = StartChainWithEmb(true);
  ASSERT_NE(primary, nullptr);
  primary.reset();
  EXPECT_EQ(StopCleanly(1), std::vector<int>{0});  // held by process 101
  EXPECT_EQ(StopCleanly(0), std::vector<int>{0});  // by 100
  auto resumed = [](uint64_t version, const std::vector<Chain>& chains,
                    std::map<uint32_t, uint64_t> incarnations, uint64_t from) {
    proto::RingRecord record = Ring(version, chains, std::move(incarnations))->record();
    record.mutable_shards(0)->set_resumed_from(from);
    return std::make_shared<const ShardRing>(*ShardRing::FromRecord(record));
  };
  Start(1, 201);
  EXPECT_EQ(host(1).Offers(), (std::map<int, uint64_t>{{0, 101}}));
  SetRing(resumed(3, {{{1}}}, {{1, 201}}, 101), {1});
  std::shared_ptr<PsCore> back = Primary(1);
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(Read(PsCoreTestPeer::store(*back), keys_), Read(memory_, keys_)) << "the resumed copy";
  PushRound(*back, memory_, keys_, &request_id_);

  Start(0, 200);
  SetRing(resumed(4, {{{1}, {0}}}, {{1, 201}, {0, 200}}, 101), {0, 1});
  ASSERT_TRUE(WaitSynced(0, 0));
  EXPECT_EQ(transport_.snapshot_parts("h0"), 0) << "server 0's kept copy was replaced";
  SetRing(resumed(5, {{{1, 0}}}, {{1, 201}, {0, 200}}, 101), {0, 1});
  PushRound(*back, memory_, keys_, &request_id_);
  const std::string want = Read(memory_, keys_);
  EXPECT_EQ(Read(PsCoreTestPeer::store(*back), keys_), want) << "the primary";
  std::shared_ptr<PsCore> copy = OnlyCore(0);
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(Read(PsCoreTestPeer::store(*copy), keys_), want) << "the rejoined copy";

  // Both stop again; server 0 comes back to a ring resuming from a process
  // whose copy it does not hold.
  back.reset();
  copy.reset();
  EXPECT_EQ(StopCleanly(1), std::vector<int>{0});
  EXPECT_EQ(StopCleanly(0), std::vector<int>{0});
  Start(0, 300);
  EXPECT_EQ(host(0).Offers(), (std::map<int, uint64_t>{{0, 200}}));
  SetRing(resumed(6, {{{0}}}, {{0, 300}}, 999), {0});
  EXPECT_FALSE(host(0).ForWorker(0).ok()) << "a copy other than the one named was served";
  EXPECT_TRUE(host(0).OfferedShards().empty());
}

// A copy with a table held in memory is not kept: its rows die with the
// process, and the next one holds nothing of it.
TEST_F(KeptCopyTest, ACopyWithATableInMemoryIsNotKept) {
  table_dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/kept_not");
  std::shared_ptr<PsCore> primary = StartChainWithEmb(false);
  ASSERT_NE(primary, nullptr);
  proto::TableDef tiered = Emb(true);
  tiered.set_name("emb2");
  ASSERT_TRUE(primary->CreateTable(CreateTableRequestFor(tiered)).ok());
  ASSERT_TRUE(Replicated(*primary).ok());
  EXPECT_EQ(Directories(table_dir_, 1).size(), 1u);
  EXPECT_TRUE(StopCleanly(1).empty());
  Start(1, 201);
  EXPECT_TRUE(host(1).OfferedShards().empty());
  EXPECT_TRUE(Directories(table_dir_, 1).empty());
}

// A kept copy is used only when a ring naming the new process makes it join
// the shard's chain; a ring that names it and places it elsewhere drops the
// copy with its directories.
TEST_F(KeptCopyTest, AKeptCopyTheRingDoesNotUseIsDropped) {
  table_dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/kept_dropped");
  std::shared_ptr<PsCore> primary = StartChainWithEmb(true);
  ASSERT_NE(primary, nullptr);
  EXPECT_EQ(StopCleanly(1), std::vector<int>{0});
  SetRing(Ring(2, {{{0}}}), {0});
  Start(1, 201);
  // A ring still naming the earlier process leaves the offer.
  SetRing(Ring(2, {{{0}}}, {{1, 101}}), {1});
  EXPECT_EQ(host(1).OfferedShards(), std::vector<int>{0});
  EXPECT_EQ(Directories(table_dir_, 1).size(), 1u);
  SetRing(Ring(3, {{{0}}}, {{1, 201}}), {1, 0});  // names it, holds nothing
  EXPECT_TRUE(host(1).OfferedShards().empty());
  EXPECT_TRUE(Directories(table_dir_, 1).empty()) << "a dropped kept copy's directory stays";
}

// Kept files that are damaged, name a directory outside this server id's,
// or were left half written are not used, and are removed.
TEST_F(ShardHostTest, DamagedOrForeignKeptFilesAreIgnoredAndRemoved) {
  table_dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/kept_damaged");
  const std::string root = absl::StrCat(table_dir_, "/h1");
  std::filesystem::create_directories(root);
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(absl::StrCat(root, "/", name), std::ios::binary) << bytes;
  };
  write("shard0.id1-90-0.kept", "not a proto");
  proto::KeptCopy outside;
  *outside.mutable_state()->add_tables() = Emb(true);
  outside.set_scratch("id1-90-0/../../elsewhere");
  write("shard0.id1-90-1.kept", outside.SerializeAsString());
  write("shard0.id1-90-2.kept.tmp", "half");
  Start(1, 91);
  EXPECT_TRUE(host(1).OfferedShards().empty());
  EXPECT_TRUE(Directories(table_dir_, 1).empty());
}

// A restarted process (a new incarnation of the server id) removes the
// directories its earlier process left; other ids' stay.
TEST_F(ShardHostTest, ARestartedServerRemovesItsEarlierCopiesDirectories) {
  table_dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/restart");
  const std::string root = absl::StrCat(table_dir_, "/h1");
  std::filesystem::create_directories(root + "/emb.shard0.id1-90-0");
  std::filesystem::create_directories(root + "/emb.shard0.id11-90-0");
  Start(1, 91);
  EXPECT_EQ(Directories(table_dir_, 1), std::vector<std::string>{"emb.shard0.id11-90-0"});
}

}  // namespace
}  // namespace hosttest
}  // namespace ps
