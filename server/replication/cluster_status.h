// `ps_admin status`: what a cluster's shards hold and do, as a readable
// table, from each shard's Stats (as its primary answers them).
#ifndef PS_SERVER_REPLICATION_CLUSTER_STATUS_H_
#define PS_SERVER_REPLICATION_CLUSTER_STATUS_H_

#include <string>
#include <vector>

#include "proto/ps.pb.h"

namespace ps {

struct ShardStatus {
  int shard = 0;
  std::string server;  // "server 1 (127.0.0.1:7001)"
  proto::StatsResponse stats;
};

// One line per shard (server, tables, rows, memory against the budget,
// largest worker clock, pulls, replication backlog), then one per table
// over all shards (rows, clock, pulls, sparse admissions and evictions).
std::string FormatClusterStatus(const std::vector<ShardStatus>& shards);

}  // namespace ps

#endif  // PS_SERVER_REPLICATION_CLUSTER_STATUS_H_
