// A replicated cluster's records in etcd (common/cluster_keys.h), read in
// one range and parsed: the ring and what the next ring is computed from.
// Shared by the servers' membership agent and ps_admin.
#ifndef PS_COMMON_CLUSTER_STATE_H_
#define PS_COMMON_CLUSTER_STATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/kv_store.h"
#include "common/shard_ring.h"
#include "proto/membership.pb.h"

namespace ps {

struct ClusterState {
  bool has_ring = false;
  proto::RingRecord ring;
  int64_t ring_revision = 0;  // the ring key's mod_revision
  RingInputs inputs;          // live members, synced copies, drain and add requests
  std::vector<std::string> synced_keys;
  // Leases of the live members' keys (a request about a server is attached
  // to its lease, so it disappears with the server).
  std::map<uint32_t, int64_t> member_leases;
  int64_t revision = 0;  // the store's revision at the read
};

// Parses a GetPrefix(ClusterPrefix(cluster)) result. Keys it does not know
// are ignored; a known key whose value is not its record is
// INVALID_ARGUMENT naming the key.
absl::StatusOr<ClusterState> ParseClusterState(const std::string& cluster, const KvRange& range);

// Reads and parses the cluster's records.
absl::StatusOr<ClusterState> ReadClusterState(KvStore& kv, const std::string& cluster);

}  // namespace ps

#endif  // PS_COMMON_CLUSTER_STATE_H_
