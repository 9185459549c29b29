// The metrics registry's text format, its HTTP endpoint, and the gRPC
// interceptors over a real loopback server.
#include "common/metrics.h"

#include <httplib.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_channels.h"
#include "common/grpc_metrics.h"
#include "common/metrics_http.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsRegistryTest, RendersCountersHistogramsAndCollectedGauges) {
  MetricsRegistry registry;
  registry.GetCounter("ps_things_total", "Things.", {{"kind", "a"}}).Add(3);
  registry.GetCounter("ps_things_total", "ignored: the first help stays", {{"kind", "a"}}).Add(2);
  registry.GetCounter("ps_things_total", "Things.", {{"kind", "quote\"back\\slash\nnl"}}).Add();
  Histogram& h = registry.GetHistogram("ps_wait_seconds", "Waits.", {0.1, 1}, {});
  h.Observe(0.05);
  h.Observe(0.1);  // on a bound: counted in it (le is inclusive)
  h.Observe(0.5);
  h.Observe(7);
  Histogram applied({1e-3});
  applied.Observe(5e-4);
  applied.Observe(2e-3);
  registry.AddCollector([&applied](MetricsWriter& w) {
    w.Gauge("ps_rows", "Rows per table.", {{"table", "w"}}, 12);
    w.Gauge("ps_rows", "Rows per table.", {{"table", "emb"}}, 1.5);
    w.HistogramValue("ps_apply_seconds", "Applies.", {{"shard", "0"}}, applied.Read());
  });
  const std::string text = registry.Render();
  EXPECT_EQ(text,
            "# HELP ps_apply_seconds Applies.\n"
            "# TYPE ps_apply_seconds histogram\n"
            "ps_apply_seconds_bucket{shard=\"0\",le=\"0.001\"} 1\n"
            "ps_apply_seconds_bucket{shard=\"0\",le=\"+Inf\"} 2\n"
            "ps_apply_seconds_sum{shard=\"0\"} 0.0025\n"
            "ps_apply_seconds_count{shard=\"0\"} 2\n"
            "# HELP ps_rows Rows per table.\n"
            "# TYPE ps_rows gauge\n"
            "ps_rows{table=\"w\"} 12\n"
            "ps_rows{table=\"emb\"} 1.5\n"
            "# HELP ps_things_total Things.\n"
            "# TYPE ps_things_total counter\n"
            "ps_things_total{kind=\"a\"} 5\n"
            "ps_things_total{kind=\"quote\\\"back\\\\slash\\nnl\"} 1\n"
            "# HELP ps_wait_seconds Waits.\n"
            "# TYPE ps_wait_seconds histogram\n"
            "ps_wait_seconds_bucket{le=\"0.1\"} 2\n"
            "ps_wait_seconds_bucket{le=\"1\"} 3\n"
            "ps_wait_seconds_bucket{le=\"+Inf\"} 4\n"
            "ps_wait_seconds_sum 7.65\n"
            "ps_wait_seconds_count 4\n");
}

TEST(MetricsHttpTest, ServesMetricsHealthAndReadiness) {
  MetricsRegistry registry;
  registry.GetCounter("ps_pings_total", "Pings.").Add(4);
  absl::Status readiness = absl::UnavailableError("fenced: no etcd lease");
  auto server = MetricsHttpServer::Start("127.0.0.1", 0, &registry, [&] { return readiness; });
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->port());
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->body, HasSubstr("ps_pings_total 4\n"));
  EXPECT_THAT(metrics->get_header_value("Content-Type"), HasSubstr("version=0.0.4"));
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto ready = client.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_THAT(ready->body, HasSubstr("fenced: no etcd lease"));
  readiness = absl::OkStatus();
  ready = client.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  auto missing = client.Get("/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);

  // The port is taken now: a second server on it fails, naming it.
  auto second = MetricsHttpServer::Start("127.0.0.1", (*server)->port(), &registry, nullptr);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr(absl::StrCat(":", (*server)->port())));
}

// A server as ps_server serves (server/rpc/data_call_queue.h): gRPC's async
// generic API on one completion queue. Answers ParameterServer.Info only;
// every other method is UNIMPLEMENTED.
class InfoOnlyServer {
 public:
  explicit InfoOnlyServer(MetricsRegistry* metrics) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterAsyncGenericService(&generic_);
    cq_ = builder.AddCompletionQueue();
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(NewServerMetricsInterceptors(metrics));
    builder.experimental().SetInterceptorCreators(std::move(creators));
    server_ = builder.BuildAndStart();
    Offer();
    thread_ = std::thread([this] { Serve(); });
  }
  ~InfoOnlyServer() {
    server_->Shutdown();
    cq_->Shutdown();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  struct Call {
    grpc::GenericServerContext ctx;
    grpc::GenericServerAsyncReaderWriter stream{&ctx};
    grpc::ByteBuffer request, reply;
    int step = 0;  // 0 matched, 1 read, 2 finished
  };
  void Offer() {
    auto* call = new Call;
    generic_.RequestCall(&call->ctx, &call->stream, cq_.get(), cq_.get(), call);
  }
  void Serve() {
    void* tag = nullptr;
    bool ok = false;
    while (cq_->Next(&tag, &ok)) {
      auto* call = static_cast<Call*>(tag);
      if (call->step == 0 && ok) {
        Offer();
        call->step = 1;
        call->stream.Read(&call->request, call);
      } else if (call->step == 1) {
        call->step = 2;
        if (ok && call->ctx.method() == "/ps.proto.ParameterServer/Info") {
          proto::InfoResponse reply;
          reply.set_address("a reply of some bytes");
          grpc::Slice slice(reply.SerializeAsString());
          call->reply = grpc::ByteBuffer(&slice, 1);
          call->stream.WriteAndFinish(call->reply, grpc::WriteOptions(), grpc::Status::OK, call);
        } else {
          call->stream.Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""), call);
        }
      } else {
        delete call;
      }
    }
  }

  int port_ = 0;
  grpc::AsyncGenericService generic_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::unique_ptr<grpc::Server> server_;
  std::thread thread_;
};

// A call as GrpcTransport makes it: the generic stub, raw bytes.
grpc::Status GenericCall(grpc::GenericStub* stub, const std::string& method,
                         const google::protobuf::MessageLite& request) {
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  grpc::Slice slice(request.SerializeAsString());
  grpc::ByteBuffer bytes(&slice, 1), reply;
  grpc::Status status;
  auto reader = stub->PrepareUnaryCall(&ctx, method, bytes, &cq);
  reader->StartCall();
  reader->Finish(&reply, &status, nullptr);
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

TEST(GrpcMetricsTest, CallsAreCountedOnBothSidesByMethodAndCode) {
  MetricsRegistry server_metrics;
  MetricsRegistry client_metrics;
  proto::InfoRequest request;
  request.set_table("weights");
  {
    InfoOnlyServer server(&server_metrics);
    RecordPeerCallsIn(&client_metrics);
    grpc::GenericStub stub(NewPeerChannel(absl::StrCat("127.0.0.1:", server.port())));
    RecordPeerCallsIn(nullptr);
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(GenericCall(&stub, "/ps.proto.ParameterServer/Info", request).ok());
    }
    EXPECT_EQ(
        GenericCall(&stub, "/ps.proto.ParameterServer/Stats", proto::StatsRequest()).error_code(),
        grpc::StatusCode::UNIMPLEMENTED);
  }

  const std::string served = server_metrics.Render();
  EXPECT_THAT(
      served,
      HasSubstr("ps_grpc_server_handled_total{method=\"ParameterServer/Info\",code=\"OK\"} 3\n"));
  EXPECT_THAT(served, HasSubstr("ps_grpc_server_handled_total{method=\"ParameterServer/Stats\","
                                "code=\"UNIMPLEMENTED\"} 1\n"));
  EXPECT_THAT(served, HasSubstr(absl::StrCat(
                          "ps_grpc_server_received_bytes_total{method=\"ParameterServer/Info\"} ",
                          3 * request.ByteSizeLong(), "\n")));
  EXPECT_THAT(
      served,
      HasSubstr("ps_grpc_server_handling_seconds_count{method=\"ParameterServer/Info\"} 3\n"));
  EXPECT_THAT(served,
              HasSubstr("ps_grpc_server_sent_bytes_total{method=\"ParameterServer/Info\"} "));
  EXPECT_THAT(
      served,
      Not(HasSubstr("ps_grpc_server_sent_bytes_total{method=\"ParameterServer/Info\"} 0\n")));

  const std::string made = client_metrics.Render();
  EXPECT_THAT(
      made,
      HasSubstr("ps_grpc_client_handled_total{method=\"ParameterServer/Info\",code=\"OK\"} 3\n"));
  EXPECT_THAT(made, HasSubstr(absl::StrCat(
                        "ps_grpc_client_sent_bytes_total{method=\"ParameterServer/Info\"} ",
                        3 * request.ByteSizeLong(), "\n")));
  EXPECT_THAT(made,
              HasSubstr("ps_grpc_client_call_seconds_count{method=\"ParameterServer/Stats\"} 1\n"));
}

}  // namespace
}  // namespace ps
