// The PsReplication service over a real gRPC socket (port 0), with tokens:
// only a server's token may forward, and a token bound to one server may
// only speak for it. The host has no ring, so a call that passes the
// checks is answered UNAVAILABLE by the host ("no ring yet").
#include "server/rpc/replication_service.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/replication.grpc.pb.h"
#include "server/replication/shard_host.h"
#include "server/rpc/authorizer.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

constexpr char kWorker[] = "worker-token-0123456789";
constexpr char kAdmin[] = "admin-token-0123456789";
constexpr char kAnyServer[] = "server-token-0123456789";
constexpr char kServer1[] = "server1-token-0123456789";

class NoTransport final : public ForwardTransport {
 public:
  absl::StatusOr<proto::ForwardResponse> Forward(const std::string&, const proto::ForwardRequest&,
                                                 absl::Duration) override {
    return absl::UnavailableError("no peers in this test");
  }
};

class ReplicationServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto auth = Authorizer::Parse(absl::StrCat("worker ", kWorker, "\nadmin ", kAdmin, "\nserver ",
                                               kAnyServer, "\nserver:1 ", kServer1, "\n"),
                                  "tokens");
    ASSERT_TRUE(auth.ok()) << auth.status();
    auth_ = *std::move(auth);
    ShardHostOptions options;
    options.server_id = 0;
    options.incarnation = 7;
    options.transport = &transport_;
    host_ = std::make_unique<ShardHost>(options);
    service_ = std::make_unique<ReplicationService>(host_.get(), nullptr, auth_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    calls_.Register(&builder);
    service_->Register(&calls_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    calls_.Start();
    stub_ = proto::PsReplication::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    calls_.Stop();
  }

  // Forward from `from_server` with `token` ("" for none).
  grpc::Status Forward(const std::string& token, uint32_t from_server) {
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    proto::ForwardRequest request;
    request.set_from_server(from_server);
    request.set_probe(true);
    proto::ForwardResponse response;
    return stub_->Forward(&context, request, &response);
  }

  NoTransport transport_;
  std::unique_ptr<Authorizer> auth_;
  std::unique_ptr<ShardHost> host_;
  std::unique_ptr<ReplicationService> service_;
  DataCallQueue calls_;  // outlives server_
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<proto::PsReplication::Stub> stub_;
};

TEST_F(ReplicationServiceTest, OnlyServersForwardAndOnlyForThemselves) {
  grpc::Status none = Forward("", 1);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::Status worker = Forward(kWorker, 1);
  EXPECT_EQ(worker.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(worker.error_message(), HasSubstr("Forward needs role server"));
  grpc::Status admin = Forward(kAdmin, 1);
  EXPECT_EQ(admin.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << "an operator's admin token is not a server's";
  EXPECT_THAT(admin.error_message(), HasSubstr("this token has role admin"));
  grpc::Status forged = Forward(kServer1, 2);
  EXPECT_EQ(forged.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(forged.error_message(),
              HasSubstr("says it comes from server 2, but its token is server 1's"));
  // Past the checks: the host answers (it has no ring).
  EXPECT_EQ(Forward(kServer1, 1).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Forward(kAnyServer, 2).error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace ps
