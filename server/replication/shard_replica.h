// ShardReplica: one copy of a logical shard held by a server process (see
// server/shard_host.h): the core that applies the shard's updates, the link
// that forwards them to the shard's successor, and the copy's snapshots in
// both directions: as the link's SnapshotSource (fixed under the core's
// order lock, written as bounded slice records and a last part with the
// core's state), and ApplySnapshotPart, which fills a fresh core from a
// predecessor's parts.
//
// The host creates and replaces replicas; a replica is shared (a call that
// holds its core keeps it, and so its link, alive). Begin and Write are
// called by the link's sender thread only.
#ifndef PS_SERVER_REPLICATION_SHARD_REPLICA_H_
#define PS_SERVER_REPLICATION_SHARD_REPLICA_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "proto/replication.pb.h"
#include "server/core/core_state.h"
#include "server/core/ps_core.h"
#include "server/replication/replica_link.h"

namespace ps {

struct ShardReplica final : public SnapshotSource {
  std::shared_ptr<PsCore> core;
  std::string tier_scratch;           // its tiered tables' (PsCoreOptions)
  uint64_t kept_by = 0;               // an offered kept copy: the process that held it
  CoreState state;                    // fixed by Begin
  std::unique_ptr<ReplicaLink> link;  // last: destroyed first

  absl::Status Begin(const std::function<bool()>& after) override;
  absl::Status Write(const std::function<absl::Status(proto::ForwardEntry)>& emit,
                     size_t max_record_bytes) override;

  // Applies one snapshot part to a fresh core: a table's definition and
  // records, or (the last part) the core's state at the snapshot's point.
  static absl::Status ApplySnapshotPart(PsCore& core, const proto::SnapshotPart& part);

  // The copy is no longer held here (it left the chain, or a snapshot
  // replaced it): what waits for the chain fails with `why`, and so do the
  // calls parked on its core (pulls, BSP pushes, a checkpoint's wait for
  // its cut), which nothing would tick or answer any more.
  void Retire(const absl::Status& why);
};

}  // namespace ps

#endif  // PS_SERVER_REPLICATION_SHARD_REPLICA_H_
