// ShardHost: the logical shards one server process serves, each a PsCore.
//
// Static clusters: one shard (the server's index), no replication; this is
// what every server was before replication. Replicated clusters (etcd): the
// ring (common/shard_ring.h) says which shards this server holds and its
// place in each chain. For each shard held the host keeps a core, and a
// ReplicaLink to the shard's successor; the core appends what it applies to
// the link, and writes are answered once the link says the tail has them.
//
// A ring names each server with the incarnation (process) that holds its
// copies: a process that finds its server id in a ring under another
// incarnation (it restarted before the ring dropped the old one) holds
// none of those copies, serves none of them and forwards nothing for them.
// Except the copies its previous process kept on disk at a clean stop
// (KeepCopies: shards whose tables are all tiered): it offers each when a
// ring makes it join that shard's chain again, and is caught up from its
// position instead of being sent a snapshot.
//
// Workers reach a shard's core only on its primary (ForWorker), and not at
// all while the server is fenced (its etcd lease may have expired, so
// another server may have been promoted). Forward receives a predecessor's
// stream: only from the predecessor (server and incarnation) the ring
// names, and only for this incarnation; entries applied once each in
// sequence order. A stream starts with a probe, answered with this copy's
// position; then either the entries after it (the copy is complete again
// with the caught_up batch) or a snapshot, filled into a fresh core beside
// the current copy and swapped in when its last part arrives (a snapshot
// behind a complete copy is refused). A joining copy, complete, is reported
// (on_synced).
//
// Thread-safe. Cores are shared_ptrs: a call that holds one finishes on it
// even if the ring moves the shard away meanwhile.
//
// Forward and the receiving side are in shard_host_receive.cc, kept copies
// in shard_host_kept.cc, the rest in shard_host.cc.
#ifndef PS_SERVER_REPLICATION_SHARD_HOST_H_
#define PS_SERVER_REPLICATION_SHARD_HOST_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/shard_ring.h"
#include "proto/replication.pb.h"
#include "server/core/ps_core.h"
#include "server/replication/replica_link.h"
#include "server/replication/shard_replica.h"

namespace ps {

struct ShardHostOptions {
  // Template of every shard's core; server_index (the shard) and
  // num_servers (the number of shards) are set per shard.
  PsCoreOptions core;
  // Replicated: this server's id and how links reach other servers (must
  // outlive the host). Null transport: static, one shard, core.server_index.
  uint32_t server_id = 0;
  uint64_t incarnation = 0;  // this process's (proto::MemberRecord)
  ForwardTransport* transport = nullptr;
  // Recent entries each copy keeps to catch a successor up without a
  // snapshot (ReplicaLink::Options::history_bytes), when r > 1.
  size_t history_bytes = 64 << 20;
  // Runs (on a gRPC thread, without host locks) when a joining copy of
  // `shard` is complete.
  std::function<void(int shard)> on_synced;
  // A successor that acknowledges nothing for stuck_after (every forward
  // failing or refused while it is live in etcd: a partition between the
  // two servers, a copy it cannot take) is handed to on_successor_stuck
  // (on the link's thread), which asks the manager to take it out of the
  // chain. The links' RPC timeout is twice stuck_after. 0: never.
  absl::Duration stuck_after = absl::ZeroDuration();
  std::function<void(int shard, uint32_t server, uint64_t incarnation, const absl::Status&)>
      on_successor_stuck;
  // Loads the newest checkpoint into the cores of copies a ring makes this
  // server hold as the primary of a chain marked restored_at (the first
  // ring of a cluster started with --restore; a chain rebuilt after every
  // copy was lost), by shard, before they serve; the chain's other servers
  // are copied from it. Runs on the thread that sets the ring, without host
  // locks. Null, or on an error (logged): such copies stay incomplete.
  std::function<absl::Status(const std::map<int, PsCore*>& cores, const ShardRing& ring)> restore;
};

class ShardHost {
 public:
  explicit ShardHost(ShardHostOptions options);
  ~ShardHost();

  bool replicated() const { return options_.transport != nullptr; }

  // The core that serves workers for `shard` (-1: the request named none).
  // A static server has one: its own shard's (clients check at connect, by
  // Info, that they list the servers in shard order). Errors (replicated):
  // UNAVAILABLE when this server is not the shard's primary in its ring
  // (names the ring version and the primary, so the client re-reads the
  // ring), when it is fenced, or before the first ring; INVALID_ARGUMENT for
  // a shard outside the ring.
  absl::StatusOr<std::shared_ptr<PsCore>> ForWorker(int shard) const;

  // A predecessor's batch. `done` gets OK with the sequence number applied
  // at the tail (for a probe: this copy's position), or: FAILED_PRECONDITION
  // when the sender is not this server's predecessor for the shard in this
  // server's ring (server or incarnation), the request is meant for another
  // incarnation, the stream is unknown (not probed) or has a gap, a
  // snapshot is behind this complete copy, or an entry does not apply (the
  // copy is then incomplete until a snapshot); UNAVAILABLE when fenced.
  using ForwardDone = std::function<void(absl::Status, proto::ForwardResponse)>;
  void Forward(const proto::ForwardRequest& request, ForwardDone done);

  // Stopping, first step: ForWorker refuses (UNAVAILABLE: the client
  // retries at the new primary); forwards are still taken, so that what
  // the chain carries reaches its tail.
  void StopTakingWorkerCalls();
  // Stopping: every link fails what waits for the chain with `status`, and
  // no forward is taken any more (UNAVAILABLE). Idempotent.
  void Close(const absl::Status& status);
  // A clean stop, after Close and once no call is running (the RPC server
  // shut down): each complete copy whose tables are all tiered is kept on
  // disk (its tables' caches written, their directories closed, and its
  // state and position in <table_dir>/shard<i>.<scratch>.kept), for the
  // server id's next process to offer; so are kept copies no ring took.
  // Returns the shards kept; the others' reasons are logged. The host takes
  // no call after this.
  std::vector<int> KeepCopies();
  // The shards KeepCopies would keep now: complete copies whose tables are
  // all tiered (what a stopping server announces, before it leaves).
  std::vector<int> KeepableShards() const;
  // Shards whose kept copy this process offers (loaded at start, not yet
  // taken by a ring, nor dropped), and with the process that held each
  // (what it registers with: proto::MemberRecord.kept).
  std::vector<int> OfferedShards() const;
  std::map<int, uint64_t> Offers() const;

  // A new ring version (ignored when not newer than the current one).
  void SetRing(std::shared_ptr<const ShardRing> ring);
  std::shared_ptr<const ShardRing> ring() const;
  // Fenced: no worker call and no forward is served (the lease may be gone).
  void SetFenced(bool fenced);
  bool fenced() const;

  // Shards whose copy here is complete.
  std::vector<int> CompleteShards() const;
  // Shards whose copy here is complete and was brought up to its
  // predecessor's by the current stream (what a joining server may report
  // as synced; a complete copy kept from an earlier place in the chain may
  // be behind until its stream catches it up).
  std::vector<int> SyncedShards() const;
  // Every core held (for ticks, stats and shutdown).
  std::vector<std::shared_ptr<PsCore>> Cores() const;
  // The process's memory budget, shared by every shard's store.
  const MemoryBudget& process_budget() const { return process_budget_; }
  // Replication counters summed over the links.
  ReplicaLink::Stats LinkStats() const;
  // The counters of the link of `shard` (to its successor); nullopt when
  // the host is static or does not hold the shard.
  std::optional<ReplicaLink::Stats> LinkStats(int shard) const;

 private:
  // One shard held here: its core, the copy source over it, and its link.
  using Replica = ShardReplica;
  // A shard's slot: the replica (replaced by a new stream's snapshot) and
  // the receiving state.
  struct Slot {
    std::shared_ptr<Replica> replica;  // guarded by the host's mu_
    bool complete = false;             // guarded by the host's mu_
    // The current stream brought the copy up to its sender's (a snapshot's
    // last part, or a catch-up): what a joining copy reports. A copy kept
    // from before (complete, but maybe behind) is not synced until then.
    bool synced = false;  // guarded by the host's mu_
    // Made while the ring named this server's previous process (constant).
    bool unnamed = false;
    // The copy was kept by this server's previous process (KeepCopies):
    // not complete (it is not in the chain), but a probe is told it holds a
    // copy at its position, so that the predecessor may send only what it
    // lacks. Until the copy is caught up or replaced. Guarded by the host's
    // mu_.
    bool offered = false;
    absl::Mutex mu;  // serializes the shard's Forward calls
    uint64_t stream ABSL_GUARDED_BY(mu) = 0;
    uint64_t next_seq ABSL_GUARDED_BY(mu) = 1;
    // A snapshot being received: swapped in for `replica` at its last part.
    std::shared_ptr<Replica> incoming ABSL_GUARDED_BY(mu);
  };
  // `history`: whether the copy keeps recent entries (r > 1). `scratch`:
  // its tiered tables' directories' suffix ("": a new one); `reuse`: they
  // hold a kept copy, served again.
  std::unique_ptr<Replica> NewReplica(int shard, bool history, std::string scratch = "",
                                      bool reuse = false) const;
  // At start: the copies the server id's earlier processes kept, each
  // loaded into offered_ (its directories renamed to this process's), its
  // .kept file removed.
  void LoadKeptCopies();
  // The kept copy at `path` (its shard in *shard), loaded; null (logged)
  // when it cannot be served.
  std::shared_ptr<Replica> LoadKeptCopy(const std::string& path, int* shard);
  // Keeps one copy (KeepCopies), held as a member of the chain by process
  // `held_by`; nothing may apply to it meanwhile (its slot's mu held, or
  // not in a slot).
  absl::Status KeepCopy(int shard, Replica& replica, uint64_t held_by);
  // The copies `ring` (if newer) makes this server hold as the primary of a
  // chain marked restored_at, with no copy of its own yet: loaded by
  // options_.restore (null when it failed).
  std::map<int, std::shared_ptr<Replica>> RestoreFor(const ShardRing& ring)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the ring names this process (not an earlier one of this id).
  bool NamesMeLocked(const ShardRing& ring) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The replica's core, keeping the whole replica (and so the link the core
  // appends to) alive while the caller holds it, even after the ring drops
  // it.
  static std::shared_ptr<PsCore> CoreOf(const std::shared_ptr<Replica>& replica);
  // Points the slot's link at the shard's successor in `ring` (no target
  // until the slot's copy is complete).
  void RetargetLocked(int shard, Slot& slot, const ShardRing& ring) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Forward's work on the slot (under its lock): applies the request, fills
  // *response and, when it succeeds, sets *core to the core that holds
  // what was applied.
  absl::Status Receive(int shard, const proto::ForwardRequest& request, Slot& slot,
                       const ShardRing& ring, std::shared_ptr<PsCore>* core,
                       proto::ForwardResponse* response, bool* became_complete)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Receive's parts, with the slot's mu held: a probe starts a stream; a
  // snapshot part fills a fresh copy (installed at the last part); an
  // update applies to the copy (one this copy already has is passed over);
  // a caught-up stream makes the copy complete and synced. `in` is the
  // copy being applied to, as they change it.
  struct Receiving;
  void ReceiveProbe(const proto::ForwardRequest& request, Slot& slot, Receiving& in,
                    proto::ForwardResponse* response) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status ReceiveSnapshotPart(int shard, uint32_t from_server, const proto::SnapshotPart& part,
                                   Slot& slot, const ShardRing& ring, Receiving& in)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status ReceiveUpdate(int shard, const proto::ForwardEntry& entry, Slot& slot, Receiving& in)
      ABSL_LOCKS_EXCLUDED(mu_);
  void CaughtUp(int shard, Slot& slot, Receiving& in) ABSL_LOCKS_EXCLUDED(mu_);
  // Makes `fresh` the slot's copy (complete, and synced, or not yet), points
  // its link by the ring, and closes the link of the copy it replaces.
  // FAILED_PRECONDITION, nothing replaced, when the copy it would replace is
  // complete and the shard's primary (it may hold writes `fresh` lacks).
  absl::Status Install(int shard, Slot& slot, std::shared_ptr<Replica> fresh, bool complete)
      ABSL_LOCKS_EXCLUDED(mu_);
  std::string Who() const;
  // "id<server_id>-<incarnation>-": this process's copies' scratch
  // directories start so (then a count); RemoveOldTierScratch removes the
  // server id's others under the table_dir.
  std::string TierScratchPrefix() const;
  void RemoveOldTierScratch() const;

  const ShardHostOptions options_;
  // Every core's store charges this budget (core.limits.memory_budget_bytes
  // for the whole process), whatever the number of shards held.
  mutable MemoryBudget process_budget_;  // thread-safe
  // The process's other limits, over all its shards: parked calls (a unit
  // each, up to core.limits.max_parked_calls), kept key lists (up to
  // core.limits.key_list_cache_bytes) and the links' histories (up to a
  // quarter of the memory budget); the last two are also charged to
  // process_budget_, so tables and these never hold more than it together.
  mutable MemoryBudget process_parked_;
  mutable MemoryBudget process_key_lists_;
  mutable MemoryBudget process_history_;
  // The tiered tables' files of every shard (core.limits.disk_budget_bytes;
  // 0: no limit).
  mutable MemoryBudget process_disk_;
  // Names the scratch directories of the copies' tiered tables (each copy
  // of a shard its own: a shard dropped and copied again starts afresh).
  mutable std::atomic<uint64_t> copies_made_{0};
  mutable absl::Mutex mu_;
  std::shared_ptr<const ShardRing> ring_ ABSL_GUARDED_BY(mu_);
  bool fenced_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // StopTakingWorkerCalls
  std::map<int, std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  // Kept copies loaded at start, by shard, until a ring that names this
  // process makes it join the shard's chain (the slot takes the copy) or
  // places it elsewhere (the copy is dropped).
  std::map<int, std::shared_ptr<Replica>> offered_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_REPLICATION_SHARD_HOST_H_
