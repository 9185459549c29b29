// Operator requests on a replicated cluster (ps_admin add-server | drain |
// ring), through its records in etcd.
//
// AddServer and DrainServer write a request key (adding/<id>, draining/<id>)
// attached to the server's own etcd lease, so that the request ends with the
// server; the managing server (membership_agent.h) turns it into ring
// versions (NextRing, common/shard_ring.h): joining copies are made, catch
// up, join their chains, and the copies no longer needed leave them. Both
// then wait until the ring has settled (the manager has nothing left to do)
// and report what happened, calling `progress` with each ring version seen.
#ifndef PS_SERVER_REPLICATION_CLUSTER_ADMIN_H_
#define PS_SERVER_REPLICATION_CLUSTER_ADMIN_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/kv_store.h"
#include "common/shard_ring.h"

namespace ps {

struct ClusterAdminOptions {
  KvStore* kv = nullptr;  // not owned
  std::string cluster = "default";
  absl::Duration timeout = absl::Minutes(5);
  Clock* clock = Clock::Real();
  std::function<void(const std::string& line)> progress;  // may be empty
};

// The cluster's current ring. NOT_FOUND when the cluster has none yet.
absl::StatusOr<ShardRing> ReadRing(KvStore& kv, const std::string& cluster);

// Gives a registered server (ps_server --etcd --server_id=id) its share of
// the shards and waits until it holds them as a full chain member. Returns
// the shards it holds then. Errors: NOT_FOUND when the server is not
// registered (or leaves while waiting); FAILED_PRECONDITION when the ring
// settled without giving it a shard (there are more servers than copies to
// spread), or it is being drained; DEADLINE_EXCEEDED after the timeout.
absl::StatusOr<std::vector<int>> AddServer(const ClusterAdminOptions& options, uint32_t server);

// Moves every copy off a registered server and waits until it holds none;
// it may then be stopped without the cluster losing a replica. Errors:
// NOT_FOUND as above; FAILED_PRECONDITION when fewer than `replicas` other
// live servers would remain (the request is not written), or the ring
// settled with the server still holding a shard; DEADLINE_EXCEEDED.
absl::Status DrainServer(const ClusterAdminOptions& options, uint32_t server);

}  // namespace ps

#endif  // PS_SERVER_REPLICATION_CLUSTER_ADMIN_H_
