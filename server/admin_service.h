// gRPC adapter for the PsAdmin service (proto/admin.proto): MARK, WRITE and
// ABORT go to this server's Checkpointer; COORDINATE to the function the
// server gives when it coordinates checkpoints (server 0 with a checkpoint
// directory), else it fails with FAILED_PRECONDITION saying where to ask.
// No logic of its own: handlers never block (the Checkpointer and the
// coordinator answer through callbacks). Thread-safe.
#ifndef PS_SERVER_ADMIN_SERVICE_H_
#define PS_SERVER_ADMIN_SERVICE_H_

#include <functional>

#include "proto/admin.grpc.pb.h"
#include "server/authorizer.h"
#include "server/checkpointer.h"

namespace ps {

class AdminService final : public proto::PsAdmin::CallbackService {
 public:
  using Done = std::function<void(absl::StatusOr<proto::CheckpointResponse>)>;
  using Coordinate = std::function<void(const proto::CheckpointRequest&, Done)>;

  // `checkpointer` and `authorizer` (may be null: every call allowed; else
  // calls need the admin role) must outlive the service; `coordinate` may
  // be empty.
  AdminService(Checkpointer* checkpointer, int server_index, Coordinate coordinate,
               const Authorizer* authorizer = nullptr)
      : checkpointer_(checkpointer),
        server_index_(server_index),
        coordinate_(std::move(coordinate)),
        authorizer_(authorizer) {}

  grpc::ServerUnaryReactor* Checkpoint(grpc::CallbackServerContext* ctx,
                                       const proto::CheckpointRequest* req,
                                       proto::CheckpointResponse* resp) override;

 private:
  Checkpointer* const checkpointer_;
  const int server_index_;
  const Coordinate coordinate_;
  const Authorizer* const authorizer_;
};

}  // namespace ps

#endif  // PS_SERVER_ADMIN_SERVICE_H_
