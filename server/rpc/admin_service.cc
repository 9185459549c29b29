#include "server/rpc/admin_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/admin.grpc.pb.h"

namespace ps {

void AdminService::Register(DataCallQueue* queue) {
  queue->Handle(absl::StrCat("/", proto::PsAdmin::service_full_name(), "/Checkpoint"),
                [this](DataCall* call) { Checkpoint(call); });
}

void AdminService::Checkpoint(DataCall* call) {
  proto::CheckpointRequest request;
  if (!call->ParseRequest(&request)) return;
  if (absl::Status s = Authorize(authorizer_, call->context(), Role::kAdmin, "Checkpoint");
      !s.ok()) {
    return call->Finish(s);
  }
  Done done = [call](absl::StatusOr<proto::CheckpointResponse> reply) {
    if (!reply.ok()) return call->Finish(reply.status());
    call->Reply(absl::OkStatus(), *reply);
  };
  if (request.action() != proto::CHECKPOINT_COORDINATE) {
    part_(request, std::move(done));
  } else if (coordinate_) {
    coordinate_(request, std::move(done));
  } else {
    done(absl::FailedPreconditionError(absl::StrCat(
        "server ", server_index_,
        " does not coordinate checkpoints: ask server 0 (static cluster, started with "
        "--checkpoint_dir and --servers) or the primary of shard 0 (replicated cluster, "
        "--checkpoint_dir)")));
  }
}

}  // namespace ps
