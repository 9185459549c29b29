#include "server/rpc/admin_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace ps {

grpc::ServerUnaryReactor* AdminService::Checkpoint(grpc::CallbackServerContext* ctx,
                                                   const proto::CheckpointRequest* req,
                                                   proto::CheckpointResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (absl::Status s = Authorize(authorizer_, *ctx, Role::kAdmin, "Checkpoint"); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  // gRPC keeps resp alive until Finish.
  Done done = [reactor, resp](absl::StatusOr<proto::CheckpointResponse> reply) {
    if (reply.ok()) *resp = std::move(*reply);
    reactor->Finish(ToGrpcStatus(reply.status()));
  };
  if (req->action() != proto::CHECKPOINT_COORDINATE) {
    part_(*req, std::move(done));
  } else if (coordinate_) {
    coordinate_(*req, std::move(done));
  } else {
    done(absl::FailedPreconditionError(absl::StrCat(
        "server ", server_index_,
        " does not coordinate checkpoints: ask server 0 (static cluster, started with "
        "--checkpoint_dir and --servers) or the primary of shard 0 (replicated cluster, "
        "--checkpoint_dir)")));
  }
  return reactor;
}

}  // namespace ps
