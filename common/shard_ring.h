// ShardRing: which servers hold each logical shard of a replicated cluster,
// as one version of proto::RingRecord (proto/membership.proto), and the pure
// step that turns one version into the next when servers die, join or drain.
//
// Slices hash to logical shards exactly as they hash to servers in a static
// cluster (common/placement.h, with num_servers = the number of shards), so
// the planner is the same; a shard is served by its chain (primary first,
// tail last). Chains start as shard i -> servers i, i+1, ... (r distinct
// ones, in ring order). ShardRing is immutable and thread-safe; NextRing is
// a pure function, so every server computes the same next version.
#ifndef PS_COMMON_SHARD_RING_H_
#define PS_COMMON_SHARD_RING_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/membership.pb.h"

namespace ps {

class ShardRing {
 public:
  // Checks the record: at least one shard, replicas >= 1, every server of a
  // chain has a member entry, no server twice in one chain. Errors:
  // INVALID_ARGUMENT naming the shard or server.
  static absl::StatusOr<ShardRing> FromRecord(proto::RingRecord record);
  // The first version over the first servers, `members`, which must be
  // servers 0 .. n-1, n = min(members, num_shards) >= 1 (n may be below
  // num_shards: more logical shards than servers, so that the cluster can
  // later spread over more servers): shard i's chain is servers i mod n,
  // i+1 mod n, ... (min(r, n) distinct ones). Errors: INVALID_ARGUMENT when
  // a member is missing or r < 1. `restore`: every chain starts from the
  // newest checkpoint (ShardChain.restored_at = 1): its first server loads
  // it, and the others are joining copies of that one.
  static absl::StatusOr<ShardRing> Initial(int num_shards, int replicas,
                                           const std::map<uint32_t, proto::MemberRecord>& members,
                                           bool restore = false);

  uint64_t version() const { return record_.version(); }
  int num_shards() const { return record_.shards_size(); }
  int replicas() const { return static_cast<int>(record_.replicas()); }
  const proto::RingRecord& record() const { return record_; }

  // The primary of the shard, or nullopt when its chain is empty (every
  // copy lost).
  std::optional<uint32_t> Primary(int shard) const;
  // The server this one forwards the shard's updates to: the next in the
  // chain, or after the tail the first joining server; nullopt for the last.
  // Also nullopt when `server` is not in the chain.
  std::optional<uint32_t> Successor(int shard, uint32_t server) const;
  // Whether `server` is in the shard's chain or joining it.
  bool Holds(int shard, uint32_t server) const;
  bool IsPrimary(int shard, uint32_t server) const { return Primary(shard) == server; }
  // host:port of a server named in the ring ("" if not named).
  std::string Address(uint32_t server) const;
  uint64_t Incarnation(uint32_t server) const;
  // "shard 2: 1 -> 0 (+3 joining)" per shard, for logs and ps_admin.
  std::string Describe() const;

 private:
  explicit ShardRing(proto::RingRecord record) : record_(std::move(record)) {}
  proto::RingRecord record_;
};

// What the manager knows besides the ring: the live servers (members with a
// lease) and which joining servers finished their copy.
struct RingInputs {
  std::map<uint32_t, proto::MemberRecord> live;
  // (shard, server) -> the incarnation that finished copying the shard.
  std::map<std::pair<int, uint32_t>, uint64_t> synced;
  // (shard, server) -> the incarnation its predecessor reported stuck: it
  // does not acknowledge, though live (proto::StuckRecord).
  std::map<std::pair<int, uint32_t>, uint64_t> stuck;
  std::vector<uint32_t> draining;  // asked to leave (ps_admin drain)
  std::vector<uint32_t> adding;    // asked to take shards (ps_admin add-server)
  // (shard, server): the server stopped cleanly keeping its copy of the
  // shard on disk, and may come back with it (proto::ReturningRecord, for
  // its grace period).
  std::set<std::pair<int, uint32_t>> returning;
  // The cluster keeps checkpoints: a chain every copy of which was lost is
  // rebuilt from the newest one rather than left LOST.
  bool rebuild_lost = false;
};

// The next ring version, or nullopt when nothing changes. In this order:
//  1. a server that is not live, or live under another incarnation (it
//     restarted and lost its copies), leaves every chain; the next in a
//     chain becomes primary. But a chain none of whose servers is live
//     keeps those not known to have restarted: their lease may have lapsed
//     in an etcd stall or a pause, with their copies intact, and they
//     register again under the same incarnation (the chain gets no joining
//     server meanwhile: nothing to copy from); or, when one of those is
//     live again under a new incarnation offering the copy of the shard
//     that the incarnation the ring names kept (MemberRecord.kept: a clean
//     stop, ShardHost::KeepCopies), the chain resumes from it: that server
//     alone, resumed_from set to that incarnation;
//  1b. a server reported stuck in a chain (under the incarnation the ring
//     names) leaves that chain, unless it is the chain's only live server;
//     while the report lasts it is not given that shard again (4, 5);
//  2. a joining server whose copy finished joins the chain's end;
//  3. a draining server leaves a chain once the chain has r other servers
//     (or, with fewer live ones, once all of them are in it);
//  4. a chain with fewer than r servers (joining included; draining ones
//     not counted; a returning server away counted, so that its place is
//     kept for it) gets the live, non-draining server holding the fewest
//     shards as a joining one (lowest id on ties), a live returning server
//     of the shard first (it offers its kept copy);
//  5. servers being added (`adding`, live) take over shards: while one holds
//     fewer shards than the average rounded down, it joins the chain of the
//     shard of the most loaded server (it becomes that shard's primary once
//     synced, and the server it relieves leaves the chain: see 3).
// A chain is emptied (LOST: clients get UNAVAILABLE naming it) only when
// every server of it restarted: then no copy of it exists any more. With
// `rebuild_lost` (the cluster keeps checkpoints), such a chain is rebuilt
// at once instead: of the min(r, live) least loaded live, non-draining
// servers, the first becomes its chain and loads the shard from the newest
// checkpoint (restored_at = the new version), the others join it as
// copies; the updates after the cut are lost, and reported by the server
// that loads it.
std::optional<proto::RingRecord> NextRing(const proto::RingRecord& current,
                                          const RingInputs& inputs);

}  // namespace ps

#endif  // PS_COMMON_SHARD_RING_H_
