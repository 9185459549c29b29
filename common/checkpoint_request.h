// Asking a cluster for a checkpoint, as a client: one call to the server that
// coordinates checkpoints (server 0 of a static cluster, the primary of
// shard 0 of a replicated one), which takes the cut and writes it.
//
// Thread-safe: a free function with no state of its own.
#ifndef PS_COMMON_CHECKPOINT_REQUEST_H_
#define PS_COMMON_CHECKPOINT_REQUEST_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/peer_security.h"
#include "proto/admin.pb.h"

namespace ps {

// Asks the coordinator at `address` (host:port) to take a checkpoint now (a
// full one when `full`, else incremental when it can) and waits until it is
// written: up to `timeout` (at least the servers' --checkpoint_timeout_seconds,
// their wait for the rounds before the cut) plus 30 s for writing. Returns the
// checkpoint (path, sequence, base_sequence, cut, bytes, micros). Errors: the
// server's, e.g. FAILED_PRECONDITION when it does not coordinate checkpoints
// (started without --checkpoint_dir, or not the coordinator),
// DEADLINE_EXCEEDED naming a server that did not finish in time; UNAVAILABLE
// naming the coordinator when it cannot be reached. `security` null: the
// process's default (common/grpc_channels.h).
absl::StatusOr<proto::CheckpointResponse> RequestCheckpoint(const std::string& address, bool full,
                                                            absl::Duration timeout,
                                                            const PeerSecurity* security = nullptr);

}  // namespace ps

#endif  // PS_COMMON_CHECKPOINT_REQUEST_H_
