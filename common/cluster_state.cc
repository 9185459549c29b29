#include "common/cluster_state.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/cluster_keys.h"

namespace ps {

absl::StatusOr<ClusterState> ParseClusterState(const std::string& cluster, const KvRange& range) {
  ClusterState state;
  state.revision = range.revision;
  const std::string prefix = ClusterPrefix(cluster);
  for (const KvEntry& e : range.entries) {
    if (e.key.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = e.key.substr(prefix.size());
    std::vector<std::string> parts = absl::StrSplit(rest, '/');
    uint32_t id = 0;
    if (rest == "ring") {
      if (absl::Status s = FromJson(e.key, e.value, &state.ring); !s.ok()) return s;
      state.has_ring = true;
      state.ring_revision = e.mod_revision;
    } else if (parts.size() == 2 && parts[0] == "members" && absl::SimpleAtoi(parts[1], &id)) {
      proto::MemberRecord m;
      if (absl::Status s = FromJson(e.key, e.value, &m); !s.ok()) return s;
      state.inputs.live[id] = m;
      state.member_leases[id] = e.lease;
    } else if (parts.size() == 3 && parts[0] == "synced" && absl::SimpleAtoi(parts[2], &id)) {
      int shard = 0;
      proto::SyncedRecord r;
      if (!absl::SimpleAtoi(parts[1], &shard)) continue;
      if (absl::Status s = FromJson(e.key, e.value, &r); !s.ok()) return s;
      state.inputs.synced[{shard, id}] = r.incarnation();
      state.synced_keys.push_back(e.key);
    } else if (parts.size() == 3 && parts[0] == "stuck" && absl::SimpleAtoi(parts[2], &id)) {
      int shard = 0;
      proto::StuckRecord r;
      if (!absl::SimpleAtoi(parts[1], &shard)) continue;
      if (absl::Status s = FromJson(e.key, e.value, &r); !s.ok()) return s;
      state.inputs.stuck[{shard, id}] = r.incarnation();
    } else if (parts.size() == 2 && parts[0] == "returning" && absl::SimpleAtoi(parts[1], &id)) {
      proto::ReturningRecord r;
      if (absl::Status s = FromJson(e.key, e.value, &r); !s.ok()) return s;
      for (uint32_t shard : r.shards())
        state.inputs.returning.insert({static_cast<int>(shard), id});
    } else if (parts.size() == 2 && parts[0] == "draining" && absl::SimpleAtoi(parts[1], &id)) {
      state.inputs.draining.push_back(id);
    } else if (parts.size() == 2 && parts[0] == "adding" && absl::SimpleAtoi(parts[1], &id)) {
      state.inputs.adding.push_back(id);
    }
  }
  return state;
}

absl::StatusOr<ClusterState> ReadClusterState(KvStore& kv, const std::string& cluster) {
  absl::StatusOr<KvRange> range = kv.GetPrefix(ClusterPrefix(cluster));
  if (!range.ok()) return range.status();
  return ParseClusterState(cluster, *range);
}

}  // namespace ps
