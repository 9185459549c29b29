#include "server/replication_service.h"

#include "common/grpc_status.h"

namespace ps {

grpc::ServerUnaryReactor* ReplicationService::Forward(grpc::CallbackServerContext* ctx,
                                                      const proto::ForwardRequest* request,
                                                      proto::ForwardResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  host_->Forward(*request, [reactor, response](absl::Status status, proto::ForwardResponse r) {
    if (status.ok()) *response = std::move(r);
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

}  // namespace ps
