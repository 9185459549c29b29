#include "server/checkpoint_peer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_channels.h"
#include "common/grpc_status.h"
#include "grpcpp/client_context.h"
#include "proto/admin.grpc.pb.h"

namespace ps {
namespace {

class GrpcCheckpointPeer final : public CheckpointPeer {
 public:
  GrpcCheckpointPeer(int server_index, const std::string& address, const PeerSecurity* security)
      : name_(absl::StrCat("server ", server_index, " (", address, ")")) {
    stub_ = proto::PsAdmin::NewStub(NewPeerChannel(address, security));
  }

  absl::StatusOr<proto::CheckpointResponse> Call(const proto::CheckpointRequest& request,
                                                 absl::Duration timeout) override {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    proto::CheckpointResponse response;
    absl::Status status = FromGrpcStatus(stub_->Checkpoint(&context, request, &response));
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat(name_, ": ", status.message()));
    }
    return response;
  }

  const std::string& name() const override { return name_; }

 private:
  const std::string name_;
  std::unique_ptr<proto::PsAdmin::Stub> stub_;
};

}  // namespace

std::unique_ptr<CheckpointPeer> NewGrpcCheckpointPeer(int server_index, const std::string& address,
                                                      const PeerSecurity* security) {
  return std::make_unique<GrpcCheckpointPeer>(server_index, address, security);
}

absl::StatusOr<proto::CheckpointResponse> RequestCheckpoint(const std::string& address, bool full,
                                                            absl::Duration timeout,
                                                            const PeerSecurity* security) {
  proto::CheckpointRequest request;
  request.set_action(proto::CHECKPOINT_COORDINATE);
  request.set_full(full);
  return NewGrpcCheckpointPeer(0, address, security)->Call(request, timeout + absl::Seconds(30));
}

}  // namespace ps
