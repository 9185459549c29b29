// Test fixture of ShardHost tests (testonly): ShardHosts in one process,
// chained by an in-memory ForwardTransport that calls the target host's
// Forward directly, and helpers to build rings, tables and pushes. No
// sockets; waits are bounded, never sleeps.
#ifndef PS_SERVER_REPLICATION_SHARD_HOST_FIXTURE_H_
#define PS_SERVER_REPLICATION_SHARD_HOST_FIXTURE_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/shard_ring.h"
#include "gtest/gtest.h"
#include "proto/replication.pb.h"
#include "server/core/ps_core.h"
#include "server/replication/shard_host.h"

namespace ps {
namespace hosttest {

constexpr absl::Duration kWait = absl::Seconds(20);
constexpr uint64_t kKeys = 16;
constexpr uint32_t kWidth = 2;

// "h<id>": where the fixture's transport reaches server id.
std::string Address(uint32_t server);

// host.Forward, waited for (bounded) as a blocking transport call.
absl::StatusOr<proto::ForwardResponse> CallForward(ShardHost& host,
                                                   const proto::ForwardRequest& request,
                                                   absl::Duration timeout = kWait);

// Address -> host (a null host: unreachable). Counts the snapshot parts
// sent to each address.
class InMemoryTransport final : public ForwardTransport {
 public:
  // A host replaced or cleared is released outside the lock (its links
  // may be calling Forward).
  void Add(const std::string& address, std::shared_ptr<ShardHost> host);
  void Clear();
  int snapshot_parts(const std::string& address) const;
  absl::StatusOr<proto::ForwardResponse> Forward(const std::string& address,
                                                 const proto::ForwardRequest& request,
                                                 absl::Duration timeout) override;

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
// incarnation 100 + id unless given, and the servers given an incarnation.
std::shared_ptr<const ShardRing> Ring(uint64_t version, const std::vector<Chain>& chains,
                                      std::map<uint32_t, uint64_t> incarnations = {});
// Dense table "w" of kKeys keys of width kWidth, zeros, SGD at rate 1.
proto::CreateTableRequest SumTable();
// Waits (bounded) until every update applied on `core` so far is at the tail.
absl::Status Replicated(PsCore& core);
// SumTable on `core`, replicated.
absl::Status CreateTable(PsCore& core);
// A push of every key (distinct values per key and request) by worker 1,
// at clock request_id, then its replication; the push's status, else the
// replication's.
absl::Status Push(PsCore& core, uint64_t request_id);
// "table/worker=clock" for each worker clock the core keeps.
std::vector<std::string> WorkerClocks(PsCore& core);
// The values of table "w".
std::vector<float> Values(PsCore& core);

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
    if (history_bytes_ > 0) options.history_bytes = history_bytes_;
    if (!table_dir_.empty()) options.core.limits.table_dir = absl::StrCat(table_dir_, "/h", id);
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
  // Stops server `id` as a clean shutdown does (no worker call, then no
  // forward) and returns the shards it kept on disk (ShardHost::KeepCopies);
  // the host is released, unreachable.
  std::vector<int> StopCleanly(uint32_t id) {
    hosts_[id]->StopTakingWorkerCalls();
    hosts_[id]->Close(absl::UnavailableError("stopping"));
    std::vector<int> kept = hosts_[id]->KeepCopies();
    transport_.Add(Address(id), nullptr);
    hosts_[id].reset();
    return kept;
  }
  // Servers 0 -> 1 in ring 1, table "w" created on the primary (server 0),
  // which is returned (null, with a test failure, when it is not serving).
  std::shared_ptr<PsCore> StartChainOfTwo() {
    Start(0);
    Start(1);
    SetRing(Ring(1, {{{0, 1}}}), {1, 0});
    std::shared_ptr<PsCore> primary = Primary(0);
    if (primary == nullptr) return nullptr;
    absl::Status created = CreateTable(*primary);
    EXPECT_TRUE(created.ok()) << created;
    return created.ok() ? primary : nullptr;
  }
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
  std::string table_dir_;     // tiered tables' (a directory per host under it), likewise
  size_t history_bytes_ = 0;  // ShardHostOptions::history_bytes (0: its default), likewise
  absl::Mutex mu_;
  std::array<std::vector<int>, 3> synced_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> stuck_ ABSL_GUARDED_BY(mu_);  // on_successor_stuck's reports
  InMemoryTransport transport_;
  std::array<std::shared_ptr<ShardHost>, 3> hosts_;  // after what they use
};

}  // namespace hosttest
}  // namespace ps

#endif  // PS_SERVER_REPLICATION_SHARD_HOST_FIXTURE_H_
