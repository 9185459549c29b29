#include "server/replication/cluster_admin.h"

#include <atomic>
#include <thread>

#include "absl/strings/str_join.h"
#include "common/cluster_keys.h"
#include "common/cluster_state.h"
#include "common/memory_kv_store.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

constexpr char kCluster[] = "c";

// Registers servers as ps_server does (member key under its own lease).
int64_t Register(KvStore& kv, uint32_t id) {
  absl::StatusOr<int64_t> lease = kv.GrantLease(absl::Seconds(60));
  EXPECT_TRUE(lease.ok());
  proto::MemberRecord m;
  m.set_server_id(id);
  m.set_address(absl::StrCat("127.0.0.1:", 9000 + id));
  m.set_incarnation(100 + id);
  EXPECT_TRUE(kv.Put(MemberKey(kCluster, id), ToJson(m), *lease).ok());
  return *lease;
}

void WriteInitialRing(KvStore& kv, int shards, int replicas) {
  absl::StatusOr<ClusterState> state = ReadClusterState(kv, kCluster);
  ASSERT_TRUE(state.ok());
  absl::StatusOr<ShardRing> ring = ShardRing::Initial(shards, replicas, state->inputs.live);
  ASSERT_TRUE(ring.ok()) << ring.status();
  ASSERT_TRUE(kv.Put(RingKey(kCluster), ToJson(ring->record())).ok());
}

// What the managing server and the joining servers do, minus the copying:
// every joining copy reports synced at once, and the next ring is committed.
class FakeManager {
 public:
  explicit FakeManager(KvStore* kv) : kv_(kv), thread_([this] { Run(); }) {}
  ~FakeManager() {
    stop_ = true;
    thread_.join();
  }

 private:
  void Run() {
    int64_t revision = 0;
    for (int round = 0; round < 100000 && !stop_; ++round) {
      (void)kv_->WaitForChange(ClusterPrefix(kCluster), revision,
                               absl::Now() + absl::Milliseconds(20));
      absl::StatusOr<ClusterState> state = ReadClusterState(*kv_, kCluster);
      if (!state.ok() || !state->has_ring) continue;
      revision = state->revision;
      for (int i = 0; i < state->ring.shards_size(); ++i) {
        for (uint32_t s : state->ring.shards(i).joining()) {
          if (state->inputs.synced.count({i, s})) continue;
          proto::SyncedRecord r;
          r.set_ring_version(state->ring.version());
          r.set_incarnation(state->ring.members().at(s).incarnation());
          (void)kv_->Put(SyncedKey(kCluster, i, s), ToJson(r));
        }
      }
      if (std::optional<proto::RingRecord> next = NextRing(state->ring, state->inputs)) {
        (void)kv_->Txn({{RingKey(kCluster), state->ring_revision}},
                       {{KvOp::kPut, RingKey(kCluster), ToJson(*next), 0}});
      }
    }
  }

  KvStore* const kv_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

ClusterAdminOptions Options(KvStore* kv, std::vector<std::string>* lines = nullptr) {
  ClusterAdminOptions o;
  o.kv = kv;
  o.cluster = kCluster;
  o.timeout = absl::Seconds(30);
  if (lines != nullptr) o.progress = [lines](const std::string& l) { lines->push_back(l); };
  return o;
}

bool InAnyChain(const proto::RingRecord& ring, uint32_t server) {
  for (const proto::ShardChain& c : ring.shards()) {
    for (auto list : {&c.servers(), &c.joining()}) {
      if (std::find(list->begin(), list->end(), server) != list->end()) return true;
    }
  }
  return false;
}

TEST(ClusterAdminTest, ErrorsNameTheClusterAndServer) {
  MemoryKvStore kv;
  absl::StatusOr<ShardRing> none = ReadRing(kv, kCluster);
  EXPECT_TRUE(absl::IsNotFound(none.status())) << none.status();
  EXPECT_NE(none.status().message().find("cluster 'c' has no ring"), std::string::npos);
  for (uint32_t id : {0, 1, 2}) Register(kv, id);
  WriteInitialRing(kv, 3, 2);
  absl::StatusOr<std::vector<int>> added = AddServer(Options(&kv), 7);
  EXPECT_TRUE(absl::IsNotFound(added.status())) << added.status();
  EXPECT_NE(added.status().message().find("server 7 is not registered in cluster 'c'"),
            std::string::npos)
      << added.status();
  // 3 servers at r=2: draining one leaves 2, draining a second would leave 1.
  ASSERT_TRUE(kv.Put(DrainKey(kCluster, 0), "{}").ok());
  absl::Status drained = DrainServer(Options(&kv), 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(drained)) << drained;
  EXPECT_NE(drained.message().find("would leave 1 live server(s) (2) for 2 copies"),
            std::string::npos)
      << drained;
  EXPECT_TRUE(kv.Get(DrainKey(kCluster, 1))->entries.empty()) << "a refused drain wrote its key";
  absl::StatusOr<std::vector<int>> both = AddServer(Options(&kv), 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(both.status())) << both.status();
}

TEST(ClusterAdminTest, NothingHappensWithoutAManager) {
  MemoryKvStore kv;
  for (uint32_t id : {0, 1, 2, 3}) Register(kv, id);
  WriteInitialRing(kv, 3, 2);
  ClusterAdminOptions o = Options(&kv);
  o.timeout = absl::Milliseconds(300);
  absl::StatusOr<std::vector<int>> added = AddServer(o, 3);
  EXPECT_TRUE(absl::IsDeadlineExceeded(added.status())) << added.status();
  EXPECT_NE(added.status().message().find("ring v1"), std::string::npos) << added.status();
}

TEST(ClusterAdminTest, AddThenDrainMovesCopiesAndReportsEachRing) {
  MemoryKvStore kv;
  std::map<uint32_t, int64_t> leases;
  for (uint32_t id : {0, 1, 2, 3}) leases[id] = Register(kv, id);
  WriteInitialRing(kv, 3, 2);
  FakeManager manager(&kv);
  std::vector<std::string> lines;
  absl::StatusOr<std::vector<int>> added = AddServer(Options(&kv, &lines), 3);
  ASSERT_TRUE(added.ok()) << added.status() << "\n" << absl::StrJoin(lines, "\n");
  EXPECT_FALSE(added->empty());
  EXPECT_GE(lines.size(), 2u) << "expected the first ring and at least one more";
  absl::StatusOr<ShardRing> ring = ReadRing(kv, kCluster);
  ASSERT_TRUE(ring.ok());
  for (int shard : *added) EXPECT_EQ(ring->record().shards(shard).servers_size(), 2);
  // The request is the server's: it ends with the server's lease.
  EXPECT_EQ(kv.Get(AddKey(kCluster, 3))->entries.at(0).lease, leases[3]);

  ASSERT_TRUE(DrainServer(Options(&kv), 1).ok());
  ring = ReadRing(kv, kCluster);
  ASSERT_TRUE(ring.ok());
  EXPECT_FALSE(InAnyChain(ring->record(), 1)) << ring->Describe();
  for (const proto::ShardChain& c : ring->record().shards()) {
    EXPECT_EQ(c.servers_size(), 2) << ring->Describe();
  }
  ASSERT_TRUE(kv.RevokeLease(leases[1]).ok());
  EXPECT_TRUE(kv.Get(DrainKey(kCluster, 1))->entries.empty());
}

}  // namespace
}  // namespace ps
