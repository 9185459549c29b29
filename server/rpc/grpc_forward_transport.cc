#include "server/rpc/grpc_forward_transport.h"

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_channels.h"
#include "common/grpc_status.h"
#include "grpcpp/client_context.h"
#include "proto/replication.grpc.pb.h"

namespace ps {
namespace {

class GrpcForwardTransport final : public ForwardTransport {
 public:
  absl::StatusOr<proto::ForwardResponse> Forward(const std::string& address,
                                                 const proto::ForwardRequest& request,
                                                 absl::Duration timeout) override {
    return Call(address, timeout, &proto::PsReplication::Stub::Forward, request);
  }

  absl::StatusOr<proto::EtcdContactResponse> EtcdContact(const std::string& address,
                                                         absl::Duration timeout) override {
    return Call(address, timeout, &proto::PsReplication::Stub::EtcdContact,
                proto::EtcdContactRequest());
  }

  void CancelAll() override {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    for (grpc::ClientContext* context : calls_) context->TryCancel();
  }

 private:
  // One blocking call of `method` to `address`, cancellable by CancelAll.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(const std::string& address, absl::Duration timeout,
                                grpc::Status (proto::PsReplication::Stub::*method)(
                                    grpc::ClientContext*, const Request&, Response*),
                                const Request& request) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    proto::PsReplication::Stub* stub = Enter(address, &context);
    if (stub == nullptr) return absl::CancelledError("this server is stopping");
    Response response;
    grpc::Status status = (stub->*method)(&context, request, &response);
    Leave(&context);
    if (!status.ok()) return FromGrpcStatus(status);
    return response;
  }

  // The stub for `address`, with `context` registered as in flight (null
  // once CancelAll ran).
  proto::PsReplication::Stub* Enter(const std::string& address, grpc::ClientContext* context) {
    absl::MutexLock lock(&mu_);
    if (stopped_) return nullptr;
    calls_.insert(context);
    auto& stub = stubs_[address];
    if (stub == nullptr) {
      stub = proto::PsReplication::NewStub(NewPeerChannel(address));
    }
    return stub.get();
  }
  void Leave(grpc::ClientContext* context) {
    absl::MutexLock lock(&mu_);
    calls_.erase(context);
  }

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<proto::PsReplication::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

std::unique_ptr<ForwardTransport> NewGrpcForwardTransport() {
  return std::make_unique<GrpcForwardTransport>();
}

}  // namespace ps
