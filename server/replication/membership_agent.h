// MembershipAgent: a replicated server's link to the cluster's records in
// etcd (common/cluster_keys.h), behind the KvStore interface.
//
//  - Registers: grants a lease and writes members/<id> under it with a new
//    incarnation; renews the lease every ttl / 3. If no renewal has
//    succeeded for 2/3 of the ttl, the host is fenced (it refuses calls)
//    before etcd can expire the lease and another server take its shards.
//    Unless etcd is down for everyone: once a renewal is late (half the
//    ttl) the server asks every other server of its ring (EtcdContact);
//    when each one answers and none got an answer to its latest etcd call
//    either, nobody can change the ring (and etcd extends every lease when
//    it comes back), so the host serves on with the last ring, asking
//    again every ttl / 6. A server cut off from etcd, or from any other
//    server, is fenced.
//    A lease found expired is replaced by a new one under the same
//    incarnation: the process still holds its copies, and the ring keeps
//    counting them (a chain whose servers all lapsed waits for them instead
//    of being declared lost). Until the ring is read again after that, the
//    host stays fenced; and as manager the server waits one lease before
//    committing a ring, so that the others (an etcd stall lapses every
//    lease at once) can register again first. So does a manager whose own
//    lease survived a stall (its renewal went through just in time) once
//    etcd answers it again.
//    Registering into a running cluster, a server asks for its share of the
//    shards (adding/<id>, under its lease) unless it is a standby.
//  - Watches the cluster's prefix and hands every newer ring to the host.
//  - The live server with the lowest id is the manager: it commits the
//    first ring once servers 0..num_servers-1 have registered, and then each
//    NextRing (common/shard_ring.h) as a transaction on the ring's
//    mod_revision, so that of concurrent managers one wins and the others
//    re-read. Membership changes therefore wait for etcd; serving does not.
//
// Thread-safe. Owns three threads; Stop (or the destructor) joins them.
#ifndef PS_SERVER_REPLICATION_MEMBERSHIP_AGENT_H_
#define PS_SERVER_REPLICATION_MEMBERSHIP_AGENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/kv_store.h"
#include "server/replication/etcd_contact.h"
#include "server/replication/forward_transport.h"
#include "server/replication/replica_link.h"
#include "server/replication/shard_host.h"

namespace ps {

struct MembershipOptions {
  KvStore* kv = nullptr;  // not owned
  std::string cluster = "default";
  uint32_t server_id = 0;
  // This process's incarnation, the same as its ShardHost's (0: a random
  // one). Kept for the process's life, across registrations.
  uint64_t incarnation = 0;
  std::string address;  // host:port workers and servers reach this server at
  int num_shards = 1;   // for the first ring
  // The first ring waits for servers 0..num_servers-1 (0: num_shards).
  int num_servers = 0;
  int replicas = 1;  // for the first ring
  absl::Duration lease = absl::Seconds(3);
  Clock* clock = Clock::Real();
  // Where this server's answers from etcd are noted (may be null: the agent
  // keeps its own), and how it asks the other servers for theirs (null:
  // never asks, so it is fenced whenever renewals are overdue).
  EtcdContact* contact = nullptr;
  ForwardTransport* peers = nullptr;
  // Registering into a cluster that has a ring already (a new server, or one
  // that comes back): false asks for a share of the shards at once (the
  // request ps_admin add-server makes, under this server's lease); true
  // waits for ps_admin add-server, or for a chain short of copies.
  bool standby = false;
  // The cluster keeps checkpoints (--checkpoint_dir): when this server
  // manages the ring, a chain every copy of which was lost is rebuilt from
  // the newest checkpoint (RingInputs::rebuild_lost); with restore, the
  // first ring's chains load it too (ShardRing::Initial).
  bool rebuild_lost = false;
  bool restore = false;
};

// Whether etcd is down for everyone, by the other servers' answers to
// EtcdContact (an error: that server cannot be reached): true when every one
// answered and none got an answer to its latest call to etcd, or an answer
// within `silent` (a call to a stopped etcd hangs until it times out, so the
// last call that ended may still be an answered one). True for no other
// server.
bool EtcdDownEverywhere(const std::vector<absl::StatusOr<proto::EtcdContactResponse>>& peers,
                        absl::Duration silent);

class MembershipAgent {
 public:
  // Registers and starts the threads. Errors: INVALID_ARGUMENT (no store,
  // shards or replicas < 1), the store's (UNAVAILABLE naming the endpoint).
  static absl::StatusOr<std::unique_ptr<MembershipAgent>> Start(MembershipOptions options,
                                                                ShardHost* host);
  ~MembershipAgent();

  // Stops the threads; with `leave`, revokes the lease so that the others
  // take over at once instead of after the ttl. Idempotent.
  void Stop(bool leave);

  // A joining copy of `shard` is complete: recorded in etcd for the manager.
  void ReportSynced(int shard);
  // Stopping cleanly, before Stop(leave): this process keeps its copies of
  // `shards` on disk (ShardHost::KeepCopies), so the manager keeps its
  // place in their chains for `grace` and gives them to the server id's
  // next process first (proto::ReturningRecord, under a lease of `grace`).
  // Logged; an etcd error only means the chains are given to others.
  void AnnounceReturn(const std::vector<int>& shards, absl::Duration grace);
  // This server's successor in `shard`'s chain, `server` (process
  // `incarnation`), acknowledges nothing: recorded in etcd (StuckRecord,
  // under a lease of 5 ttl of its own) for the manager, which takes it out
  // of the chain.
  void ReportStuck(int shard, uint32_t server, uint64_t incarnation, const absl::Status& why);

 private:
  MembershipAgent(MembershipOptions options, ShardHost* host);
  absl::Status Register();
  void KeepAliveLoop();
  void WatchLoop();
  void FenceLoop();
  // Asks the other servers of the ring; stops at the first that is not in
  // the same etcd outage.
  bool OutageEverywhere();
  // Reads the cluster's records, hands a newer ring to the host and, as
  // manager, commits the next ring. Returns the revision read.
  absl::StatusOr<int64_t> Step();
  bool Stopping();
  std::string Who() const;

  const MembershipOptions options_;
  ShardHost* const host_;
  EtcdContact own_contact_;
  EtcdContact* const contact_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  const uint64_t incarnation_;
  int64_t lease_ ABSL_GUARDED_BY(mu_) = 0;        // 0: must register again
  bool registered_ ABSL_GUARDED_BY(mu_) = false;  // once, at least
  // Registered again at this etcd revision: fenced until a read at or after it.
  int64_t reread_after_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time manage_after_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time last_renewed_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // send time
  std::thread keepalive_;
  std::thread watcher_;
  std::thread fencer_;
};

}  // namespace ps

#endif  // PS_SERVER_REPLICATION_MEMBERSHIP_AGENT_H_
