// CheckpointPeer: how a checkpoint coordinator reaches one server's
// Checkpointer (MARK, WRITE, ABORT of proto/admin.proto). The gRPC
// implementation calls the server's PsAdmin service; tests may put a fake
// behind the interface to inject failures.
//
// Implementations are thread-safe: the coordinator calls its peers in
// parallel, each from its own thread.
#ifndef PS_SERVER_CHECKPOINT_CHECKPOINT_PEER_H_
#define PS_SERVER_CHECKPOINT_CHECKPOINT_PEER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/peer_security.h"
#include "common/shard_ring.h"
#include "proto/admin.pb.h"

namespace ps {

class CheckpointPeer {
 public:
  virtual ~CheckpointPeer() = default;
  // One call, failing with the server's error, or DEADLINE_EXCEEDED /
  // UNAVAILABLE naming the server when it does not answer within `timeout`.
  virtual absl::StatusOr<proto::CheckpointResponse> Call(const proto::CheckpointRequest& request,
                                                         absl::Duration timeout) = 0;
  // "server 1 (127.0.0.1:7001)", for messages.
  virtual const std::string& name() const = 0;
};

// A peer over gRPC to the PsAdmin service at `address` (host:port), with
// `security` (null: the process's default, common/grpc_channels.h).
std::unique_ptr<CheckpointPeer> NewGrpcCheckpointPeer(int server_index, const std::string& address,
                                                      const PeerSecurity* security = nullptr);

// A replicated cluster's peers: peer i calls the primary of logical shard i
// in `ring`, naming the shard (server/shard_checkpointers.h). Errors:
// UNAVAILABLE naming a shard that has no primary.
absl::StatusOr<std::vector<std::unique_ptr<CheckpointPeer>>> NewShardCheckpointPeers(
    const ShardRing& ring, const PeerSecurity* security = nullptr);

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_CHECKPOINT_PEER_H_
