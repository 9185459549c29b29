// CheckpointPeer: how a checkpoint coordinator reaches one server's
// Checkpointer (MARK, WRITE, ABORT of proto/admin.proto). The gRPC
// implementation calls the server's PsAdmin service; tests may put a fake
// behind the interface to inject failures.
//
// Implementations are thread-safe: the coordinator calls its peers in
// parallel, each from its own thread.
#ifndef PS_SERVER_CHECKPOINT_PEER_H_
#define PS_SERVER_CHECKPOINT_PEER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
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

// A peer over gRPC to the PsAdmin service at `address` (host:port).
std::unique_ptr<CheckpointPeer> NewGrpcCheckpointPeer(int server_index, const std::string& address);

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_PEER_H_
