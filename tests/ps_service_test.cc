// The ParameterServer gRPC service seen from the wire (a raw stub, no
// PsClient): request validation, status codes, and once-only retried pushes.
#include <cmath>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/hash.h"
#include "common/placement.h"
#include "common/protocol.h"
#include "common/wire.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "server/core/ps_core_test_peer.h"
#include "server/ps_server.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

class PsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.num_servers = 2;
    options.server_index = 0;
    options.placement.slice_size = 4;
    options.limits.max_message_bytes = 1 << 20;
    auto server = PsServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = proto::ParameterServer::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
    const proto::CreateTableRequest create = CreateTableRequestFor(SumTable("t", 1 << 20, 1));
    proto::CreateTableResponse created;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->CreateTable(&ctx, create, &created).ok());
    ASSERT_TRUE(created.created());
    // A key this server owns and one it does not.
    placement_ = options.placement;
    Placement placement(2, options.placement);
    while (placement.OwnerOfKey("t", own_) != 0) ++own_;
    while (placement.OwnerOfKey("t", foreign_) != 1) ++foreign_;
  }

  grpc::Status Push(const proto::PushRequest& req, proto::PushResponse* resp) {
    grpc::ClientContext ctx;
    return stub_->Push(&ctx, req, resp);
  }
  grpc::Status Pull(const proto::PullRequest& req, proto::PullResponse* resp) {
    grpc::ClientContext ctx;
    return stub_->Pull(&ctx, req, resp);
  }

  float ValueOf(uint64_t key) {
    proto::PullRequest req;
    req.set_table("t");
    proto::KeyRange* r = req.add_ranges();
    r->set_begin(key);
    r->set_end(key + 1);
    proto::PullResponse resp;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub_->Pull(&ctx, req, &resp).ok());
    float v = NAN;
    EXPECT_TRUE(DecodeArrayInto<float>(resp.values(), absl::MakeSpan(&v, 1), "v").ok());
    return v;
  }

  proto::PushRequest OneKeyPush(uint64_t key, float grad, uint64_t request_id) {
    proto::PushRequest req;
    req.set_table("t");
    proto::KeyRange* r = req.add_ranges();
    r->set_begin(key);
    r->set_end(key + 1);
    std::vector<float> g = {grad};
    EncodeArray<float>(g, req.mutable_values());
    req.set_worker_id(3);
    req.set_request_id(request_id);
    return req;
  }

  std::unique_ptr<PsServer> server_;
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
  uint64_t own_ = 0, foreign_ = 0;
  PlacementConfig placement_;
};

// grpc.health.v1.Health/Check of the whole server ("" service), sent as
// raw bytes: the empty request, and SERVING is field 1 = 1 (bytes 08 01).
TEST_F(PsServiceTest, HealthServiceAnswersServingWhileReady) {
  ASSERT_TRUE(server_->Readiness().ok());
  grpc::GenericStub generic(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  grpc::Status status;
  grpc::Slice empty("", 0);
  request = grpc::ByteBuffer(&empty, 1);
  // The ticker sets the serving status within a tick of the start.
  for (int i = 0; i < 200; ++i) {
    grpc::ClientContext attempt;
    absl::Notification answered;
    generic.UnaryCall(&attempt, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                      &response, [&](grpc::Status s) {
                        status = s;
                        answered.Notify();
                      });
    answered.WaitForNotification();
    if (status.ok()) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(status.ok()) << status.error_message();
  grpc::Slice reply;
  ASSERT_TRUE(response.DumpToSingleSlice(&reply).ok());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(reply.begin()), reply.size()),
            std::string("\x08\x01", 2));
}

TEST_F(PsServiceTest, RetriedPushWithSameRequestIdIsAppliedOnce) {
  proto::PushResponse first, again;
  ASSERT_TRUE(Push(OneKeyPush(own_, -2.0f, 77), &first).ok());
  ASSERT_TRUE(Push(OneKeyPush(own_, -2.0f, 77), &again).ok());
  EXPECT_FALSE(first.duplicate());
  EXPECT_TRUE(again.duplicate());
  EXPECT_EQ(ValueOf(own_), 2.0f);
  proto::PushResponse next;
  ASSERT_TRUE(Push(OneKeyPush(own_, -2.0f, 78), &next).ok());
  EXPECT_EQ(ValueOf(own_), 4.0f);
  EXPECT_EQ(next.version(), 2u);
}

TEST_F(PsServiceTest, NonFiniteGradientIsRejectedAndChangesNothing) {
  proto::PushResponse resp;
  grpc::Status s = Push(OneKeyPush(own_, std::nanf(""), 1), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("key " + std::to_string(own_)));
  s = Push(OneKeyPush(own_, INFINITY, 2), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ValueOf(own_), 0.0f);
  // The rejected ids were not recorded: a valid push may reuse them.
  ASSERT_TRUE(Push(OneKeyPush(own_, -1.0f, 1), &resp).ok());
  EXPECT_EQ(ValueOf(own_), 1.0f);
}

TEST_F(PsServiceTest, ForeignKeyIsRefusedNamingTheOwner) {
  proto::PushResponse resp;
  grpc::Status s = Push(OneKeyPush(foreign_, 1.0f, 1), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("owned by server 1, not server 0"));
}

TEST_F(PsServiceTest, MalformedRequestsAreRejected) {
  proto::PushResponse resp;
  proto::PushRequest no_keys;
  no_keys.set_table("t");
  no_keys.set_values(std::string(8, '\0'));
  EXPECT_EQ(Push(no_keys, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Neither keys nor values: a clock-only push, valid for a known table.
  no_keys.clear_values();
  EXPECT_TRUE(Push(no_keys, &resp).ok());
  no_keys.set_table("missing");
  EXPECT_EQ(Push(no_keys, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  // Likewise a pull of no keys: it marks the table read and returns nothing.
  proto::PullRequest read_mark;
  read_mark.set_table("t");
  proto::PullResponse pulled;
  ASSERT_TRUE(Pull(read_mark, &pulled).ok());
  EXPECT_TRUE(pulled.values().empty());
  read_mark.set_table("missing");
  EXPECT_EQ(Pull(read_mark, &pulled).error_code(), grpc::StatusCode::NOT_FOUND);

  proto::PushRequest both = OneKeyPush(own_, 1.0f, 0);
  std::vector<uint64_t> k = {own_};
  EncodeArray<uint64_t>(k, both.mutable_key_list());
  grpc::Status s = Push(both, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("both ranges and key_list"));

  proto::PushRequest ragged = OneKeyPush(own_, 1.0f, 0);
  ragged.mutable_values()->push_back('x');
  s = Push(ragged, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("not a multiple of 4"));

  proto::PushRequest unknown = OneKeyPush(own_, 1.0f, 0);
  unknown.set_table("missing");
  EXPECT_EQ(Push(unknown, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ValueOf(own_), 0.0f);
}

TEST_F(PsServiceTest, OversizedMessagesAreRefusedWithTheLimit) {
  // A push over the server's 1 MiB limit is refused by gRPC itself.
  proto::PushRequest big;
  big.set_table("t");
  proto::KeyRange* r = big.add_ranges();
  r->set_begin(0);
  r->set_end(1 << 19);
  big.mutable_values()->resize((1 << 19) * 4 * 2);
  proto::PushResponse resp;
  EXPECT_EQ(Push(big, &resp).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // A pull whose reply would be over the limit is refused by the service.
  proto::PullRequest pull;
  pull.set_table("t");
  r = pull.add_ranges();
  r->set_begin(0);
  r->set_end(1 << 20);
  proto::PullResponse out;
  grpc::ClientContext ctx;
  grpc::Status s = stub_->Pull(&ctx, pull, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("message limit of 1048576 bytes"));
}

TEST_F(PsServiceTest, PushBatchAppliesEachPushOnItsOwn) {
  proto::PushBatchRequest batch;
  *batch.add_pushes() = OneKeyPush(own_, -1.0f, 10);
  *batch.add_pushes() = OneKeyPush(own_, std::nanf(""), 11);
  *batch.add_pushes() = OneKeyPush(own_, -2.0f, 12);
  *batch.add_pushes() = OneKeyPush(foreign_, -1.0f, 13);
  proto::PushBatchResponse reply;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->PushBatch(&ctx, batch, &reply).ok());
  }
  ASSERT_EQ(reply.results_size(), 4);
  EXPECT_EQ(reply.results(0).code(), 0);
  EXPECT_EQ(reply.results(1).code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(reply.results(1).message(), HasSubstr("not finite"));
  EXPECT_EQ(reply.results(2).code(), 0);
  EXPECT_EQ(reply.results(3).code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(ValueOf(own_), 3.0f);
  // The same batch again (a retry): nothing is applied twice.
  proto::PushBatchResponse again;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->PushBatch(&ctx, batch, &again).ok());
  }
  EXPECT_TRUE(again.results(0).duplicate());
  EXPECT_TRUE(again.results(2).duplicate());
  EXPECT_EQ(ValueOf(own_), 3.0f);
  // BSP pushes wait for other workers and are refused in a batch.
  proto::PushBatchRequest bsp;
  *bsp.add_pushes() = OneKeyPush(own_, -1.0f, 20);
  bsp.mutable_pushes(0)->set_consistency(proto::CONSISTENCY_BOUNDED);
  proto::PushBatchResponse refused;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->PushBatch(&ctx, bsp, &refused).ok());
  EXPECT_EQ(refused.results(0).code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(ValueOf(own_), 3.0f);
}

// Key-list caching at the wire: a list sent with its signature is kept for
// its worker; the signature alone then names it; a wrong signature, an
// unknown one and another worker's are refused, nothing applied.
TEST_F(PsServiceTest, KeyListSignaturesNameListsSentBefore) {
  std::vector<uint64_t> keys;
  for (uint64_t k = own_; keys.size() < 3; ++k) {
    if (Placement(2, placement_).OwnerOfKey("t", k) == 0) keys.push_back(k);
  }
  const uint64_t signature = KeyListSignature(keys.data(), keys.size());
  proto::PullRequest pull;
  pull.set_table("t");
  pull.set_worker_id(3);
  EncodeArray<uint64_t>(keys, pull.mutable_key_list());
  pull.set_key_list_signature(signature);
  {
    proto::PullResponse reply;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->Pull(&ctx, pull, &reply).ok());
  }
  // The push names the list by its signature only.
  proto::PushRequest push;
  push.set_table("t");
  push.set_worker_id(3);
  push.set_request_id(500);
  push.set_key_list_signature(signature);
  EncodeArray<float>(std::vector<float>{-1, -2, -3}, push.mutable_values());
  proto::PushResponse pushed;
  grpc::Status status = Push(push, &pushed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(ValueOf(keys[0]), 1.0f);
  EXPECT_EQ(ValueOf(keys[2]), 3.0f);
  // Another worker's request with that signature: not its list.
  push.set_worker_id(4);
  push.set_request_id(501);
  status = Push(push, &pushed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr(kKeyListNotCached));
  EXPECT_THAT(status.error_message(), HasSubstr("worker 4"));
  // A signature nobody sent.
  push.set_worker_id(3);
  push.set_key_list_signature(signature + 1);
  status = Push(push, &pushed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  // A list whose signature is not its own.
  pull.set_key_list_signature(signature ^ 0x10);
  {
    proto::PullResponse reply;
    grpc::ClientContext ctx;
    status = stub_->Pull(&ctx, pull, &reply);
  }
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("does not match its key list of 3 keys"));
  EXPECT_EQ(ValueOf(keys[0]), 1.0f) << "a refused push changed a value";
  proto::StatsResponse stats;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->Stats(&ctx, proto::StatsRequest(), &stats).ok());
  EXPECT_EQ(stats.key_lists_kept(), 1u);
  EXPECT_EQ(stats.key_list_hits(), 1u);
  EXPECT_EQ(stats.key_list_misses(), 2u);
}

TEST_F(PsServiceTest, InfoDescribesTheShard) {
  proto::InfoResponse info;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->Info(&ctx, proto::InfoRequest(), &info).ok());
  EXPECT_EQ(info.server_index(), 0u);
  EXPECT_EQ(info.num_servers(), 2u);
  EXPECT_EQ(info.slice_size(), 4u);
  EXPECT_EQ(info.address(), server_->address());
}

// Waits (bounded) until pred() holds; returns whether it did.
template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 5000 && !pred(); ++i) absl::SleepFor(absl::Milliseconds(1));
  return pred();
}

TEST_F(PsServiceTest, CancelledParkedPullIsReleasedAtOnce) {
  for (uint32_t w : {1, 2}) {
    proto::HeartbeatRequest hb;
    hb.set_worker_id(w);
    hb.set_incarnation(w);
    hb.set_lease_ms(60'000);
    proto::HeartbeatResponse reply;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->Heartbeat(&ctx, hb, &reply).ok());
  }
  // Worker 1 at clock 5 under BSP waits for worker 2's rounds 0..4.
  proto::PullRequest req;
  req.set_table("t");
  req.add_ranges()->set_end(1);
  req.set_worker_id(1);
  req.set_clock(5);
  req.set_consistency(proto::CONSISTENCY_BOUNDED);
  proto::PullResponse resp;
  grpc::ClientContext ctx;
  grpc::Status status;
  absl::Notification done;
  stub_->async()->Pull(&ctx, &req, &resp, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  ASSERT_TRUE(Eventually([&] { return PsCoreTestPeer::clocks(server_->core()).parked() == 1; }));
  ctx.TryCancel();
  done.WaitForNotification();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(Eventually([&] { return PsCoreTestPeer::clocks(server_->core()).parked() == 0; }))
      << "the server still holds the cancelled pull";
}

// Initializing a 2 GB table takes a while; meanwhile the server answers.
TEST(PsServerTest, CreatingALargeTableDoesNotStopOtherCalls) {
  ServerOptions options;
  options.limits.memory_budget_bytes = uint64_t{3} << 30;
  auto server = PsServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = proto::ParameterServer::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  const proto::CreateTableRequest create = CreateTableRequestFor(
      WithSgd(DenseTableDef("big", uint64_t{1} << 29, 1), 0.1f));  // x 4 bytes: 2 GiB
  proto::CreateTableResponse created;
  grpc::ClientContext create_ctx;
  grpc::Status create_status;
  absl::Notification create_done;
  stub->async()->CreateTable(&create_ctx, &create, &created, [&](grpc::Status s) {
    create_status = std::move(s);
    create_done.Notify();
  });
  ASSERT_TRUE(Eventually(
      [&] { return (*server)->core().bytes_used() > 0 || create_done.HasBeenNotified(); }));
  ASSERT_FALSE(create_done.HasBeenNotified()) << create_status.error_message();
  proto::InfoResponse info;
  grpc::ClientContext info_ctx;
  ASSERT_TRUE(stub->Info(&info_ctx, proto::InfoRequest(), &info).ok());
  EXPECT_FALSE(create_done.HasBeenNotified())
      << "Info was answered only after the 2 GiB table was initialized";
  create_done.WaitForNotification();
  ASSERT_TRUE(create_status.ok()) << create_status.error_message();
  EXPECT_TRUE(created.created());
}

TEST(PsServerTest, PortInUseIsAClearError) {
  auto first = PsServer::Start(ServerOptions{});
  ASSERT_TRUE(first.ok()) << first.status();
  ServerOptions options;
  options.listen_address = (*first)->address();
  auto second = PsServer::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr("could not listen on " + (*first)->address()));
}

TEST(PsServerTest, IndexOutsideTheClusterIsRejected) {
  ServerOptions options;
  options.num_servers = 2;
  options.server_index = 2;
  EXPECT_EQ(PsServer::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
