// Cluster check: what a client asks of the servers before its first call.
// Each server, waited for up to the connect timeout, must answer Info as
// shard i of n with the client's slice size and virtual nodes, and remember
// push ids for longer than the client may retry a push.
//
// A free function over a Transport and a Clock it does not own; thread-safe.
#ifndef PS_WORKER_CLIENT_CLUSTER_CHECK_H_
#define PS_WORKER_CLIENT_CLUSTER_CHECK_H_

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/placement.h"
#include "worker/client/transport.h"

namespace ps {

struct ClusterExpectation {
  PlacementConfig placement;
  absl::Duration connect_timeout = absl::Seconds(30);
  // A replicated cluster: a shard whose primary has not read the ring yet
  // (UNAVAILABLE) is asked again until the deadline.
  bool replicated = false;
  // The client's retries, whose window must fit in the servers' push-id
  // retention.
  absl::Duration timeout = absl::Seconds(10);
  int max_attempts = 3;
  absl::Duration retry_backoff = absl::Milliseconds(50);
};

// Asks every server of `transport` for its Info and checks it. Errors:
// UNAVAILABLE or DEADLINE_EXCEEDED naming the first server that did not
// answer within connect_timeout (and the flags to check);
// FAILED_PRECONDITION naming the first server whose index, cluster size,
// slice size or virtual nodes differ, or whose retention
// (--dedup_retention_seconds) is not longer than the retry window.
absl::Status CheckCluster(Transport* transport, Clock* clock, const ClusterExpectation& expected);

}  // namespace ps

#endif  // PS_WORKER_CLIENT_CLUSTER_CHECK_H_
