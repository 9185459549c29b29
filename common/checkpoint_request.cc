#include "common/checkpoint_request.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_channels.h"
#include "common/grpc_status.h"
#include "grpcpp/client_context.h"
#include "proto/admin.grpc.pb.h"

namespace ps {

absl::StatusOr<proto::CheckpointResponse> RequestCheckpoint(const std::string& address, bool full,
                                                            absl::Duration timeout,
                                                            const PeerSecurity* security) {
  proto::CheckpointRequest request;
  request.set_action(proto::CHECKPOINT_COORDINATE);
  request.set_full(full);
  std::unique_ptr<proto::PsAdmin::Stub> stub =
      proto::PsAdmin::NewStub(NewPeerChannel(address, security));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout + absl::Seconds(30)));
  proto::CheckpointResponse response;
  absl::Status status = FromGrpcStatus(stub->Checkpoint(&context, request, &response));
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("checkpoint coordinator ", address, ": ", status.message()));
  }
  return response;
}

}  // namespace ps
