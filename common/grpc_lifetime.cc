#include "common/grpc_lifetime.h"

#include <chrono>
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"

namespace ps {

void KeepGrpcUntilExit() {
  grpc_init();
  // One callback call (to a socket that does not exist: it fails at once,
  // nothing is sent) makes the channel hold the callback queue; the channel
  // is never destroyed.
  static auto* pinned = new std::shared_ptr<grpc::Channel>(grpc::CreateChannel(
      "unix:/nonexistent/paramserver-grpc-pin", grpc::InsecureChannelCredentials()));
  grpc::GenericStub stub(*pinned);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice empty(std::string(""));
  grpc::ByteBuffer request(&empty, 1), response;
  absl::Notification done;
  stub.UnaryCall(&context, "/paramserver.Pin/Pin", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status) { done.Notify(); });
  done.WaitForNotification();
}

}  // namespace ps
