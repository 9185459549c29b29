#include "server/rpc/replication_service.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/replication.grpc.pb.h"

namespace ps {

void ReplicationService::Register(DataCallQueue* queue) {
  const std::string prefix = absl::StrCat("/", proto::PsReplication::service_full_name(), "/");
  queue->Handle(prefix + "Forward", [this](DataCall* call) { Forward(call); });
  queue->Handle(prefix + "EtcdContact", [this](DataCall* call) { EtcdContact(call); });
}

void ReplicationService::Forward(DataCall* call) {
  // Kept until the host answers, as gRPC kept the request of a callback call.
  auto request = std::make_shared<proto::ForwardRequest>();
  if (!call->ParseRequest(request.get())) return;
  if (absl::Status s =
          AuthorizeServer(authorizer_, call->context(), request->from_server(), "Forward");
      !s.ok()) {
    return call->Finish(s);
  }
  host_->Forward(*request, [call, request](absl::Status status, proto::ForwardResponse reply) {
    call->Reply(status, reply);
  });
}

void ReplicationService::EtcdContact(DataCall* call) {
  proto::EtcdContactRequest request;
  if (!call->ParseRequest(&request)) return;
  if (absl::Status s = Authorize(authorizer_, call->context(), Role::kServer, "EtcdContact");
      !s.ok()) {
    return call->Finish(s);
  }
  const absl::Duration age =
      contact_ == nullptr ? absl::InfiniteDuration() : contact_->SinceAnswer();
  proto::EtcdContactResponse reply;
  reply.set_last_call_answered(contact_ != nullptr && contact_->LastCallAnswered());
  reply.set_millis_since_answer(age == absl::InfiniteDuration() ? -1
                                                                : absl::ToInt64Milliseconds(age));
  call->Reply(absl::OkStatus(), reply);
}

}  // namespace ps
