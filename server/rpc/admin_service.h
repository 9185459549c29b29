// The PsAdmin service (proto/admin.proto) on the server's call queue: MARK, WRITE and
// ABORT go to this server's part of checkpoints (its Checkpointer; a
// replicated server's ShardCheckpointers); COORDINATE to the function the
// server gives when it coordinates checkpoints (server 0 with a checkpoint
// directory), else it fails with FAILED_PRECONDITION saying where to ask.
// No logic of its own: handlers never block (the Checkpointer and the
// coordinator answer through callbacks). Thread-safe.
#ifndef PS_SERVER_RPC_ADMIN_SERVICE_H_
#define PS_SERVER_RPC_ADMIN_SERVICE_H_

#include <functional>
#include <utility>

#include "proto/admin.pb.h"
#include "server/rpc/authorizer.h"
#include "server/rpc/data_call_queue.h"

namespace ps {

class AdminService {
 public:
  using Done = std::function<void(absl::StatusOr<proto::CheckpointResponse>)>;
  using Handler = std::function<void(const proto::CheckpointRequest&, Done)>;

  // `part` takes MARK, WRITE and ABORT; `coordinate` (may be empty)
  // COORDINATE. `authorizer` (may be null: every call allowed; else calls
  // need the admin role) must outlive the service.
  AdminService(Handler part, int server_index, Handler coordinate,
               const Authorizer* authorizer = nullptr)
      : part_(std::move(part)),
        server_index_(server_index),
        coordinate_(std::move(coordinate)),
        authorizer_(authorizer) {}

  // Serves PsAdmin.Checkpoint from `queue` (before it starts).
  void Register(DataCallQueue* queue);

 private:
  void Checkpoint(DataCall* call);

  const Handler part_;
  const int server_index_;
  const Handler coordinate_;
  const Authorizer* const authorizer_;
};

}  // namespace ps

#endif  // PS_SERVER_RPC_ADMIN_SERVICE_H_
