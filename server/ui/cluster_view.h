// The web UI's data (issue 31): a cluster's state as one JSON document,
// built from what the servers' Stats say (each shard as its primary answers
// them), the ring in etcd for replicated clusters, and the newest
// checkpoint. The page (server/ui/index.html) draws it; ps_server serves it
// at /api/cluster and `ps_admin ui` for a whole cluster.
//
// {"source": ..., "time": unix seconds,
//  "ring": {"version", "replicas", "description",
//           "shards": [{"shard", "chain": [{"server", "address", "role":
//                       "primary"|"copy"|"joining"}]}]} or null (static),
//  "shards": [{"shard", "server", "memory_bytes", "memory_budget_bytes",
//              "cpu_seconds", "key_lists_kept", "replication_pending",
//              "calls": {"Push": {"count", "seconds"}, ...},
//              "tables": [{"name", "rows", "pulls", "server_clock",
//                          "admitted", "evicted"}]}],
//  "tables": [{"name", "rows", "pulls", "server_clock"}] (over the shards),
//  "workers": [{"worker", "job", "age_seconds", "points": [{"seconds",
//               "epoch", "step", "examples", "loss", "examples_per_second",
//               "staleness"}]}],
//  "checkpoint": {"path", "cut", "age_seconds", "bytes"} or {"error"} or null,
//  "alerts": ["..."]}
//
// Alerts: a shard without a primary, a chain shorter than the replicas, a
// shard whose Stats could not be read, memory above 90% of a budget, a
// checkpoint older than `checkpoint_alert_after`.
#ifndef PS_SERVER_UI_CLUSTER_VIEW_H_
#define PS_SERVER_UI_CLUSTER_VIEW_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/shard_ring.h"
#include "server/replication/cluster_status.h"

namespace ps {

struct ClusterViewInput {
  std::string source;  // who answers: "ps_server 0 (127.0.0.1:7000)", "ps_admin"
  absl::Time now;
  std::optional<ShardRing> ring;    // replicated clusters
  std::vector<ShardStatus> shards;  // the shards read
  std::string stats_error;          // reading them failed: why ("" if not)
  struct Checkpoint {
    std::string path;
    uint64_t cut = 0;
    absl::Time time;     // when it was written
    uint64_t bytes = 0;  // of its files
  };
  std::optional<Checkpoint> checkpoint;
  std::string checkpoint_error;  // looking for one failed: why
  absl::Duration checkpoint_alert_after = absl::Minutes(30);
};

std::string ClusterViewJson(const ClusterViewInput& input);

}  // namespace ps

#endif  // PS_SERVER_UI_CLUSTER_VIEW_H_
