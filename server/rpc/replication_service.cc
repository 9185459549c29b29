#include "server/rpc/replication_service.h"

#include "common/grpc_status.h"

namespace ps {

grpc::ServerUnaryReactor* ReplicationService::Forward(grpc::CallbackServerContext* ctx,
                                                      const proto::ForwardRequest* request,
                                                      proto::ForwardResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (absl::Status s = AuthorizeServer(authorizer_, *ctx, request->from_server(), "Forward");
      !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  host_->Forward(*request, [reactor, response](absl::Status status, proto::ForwardResponse r) {
    if (status.ok()) *response = std::move(r);
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ReplicationService::EtcdContact(grpc::CallbackServerContext* ctx,
                                                          const proto::EtcdContactRequest*,
                                                          proto::EtcdContactResponse* response) {
  if (absl::Status s = Authorize(authorizer_, *ctx, Role::kServer, "EtcdContact"); !s.ok()) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  const absl::Duration age =
      contact_ == nullptr ? absl::InfiniteDuration() : contact_->SinceAnswer();
  response->set_last_call_answered(contact_ != nullptr && contact_->LastCallAnswered());
  response->set_millis_since_answer(
      age == absl::InfiniteDuration() ? -1 : absl::ToInt64Milliseconds(age));
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace ps
