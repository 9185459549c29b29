// FakeTransport: a Transport for unit tests of the client's parts without
// sockets or servers. Each call goes to the test's handler for its method
// (a public std::function), which answers at once or keeps `done` to answer
// later; a method without a handler fails with UNIMPLEMENTED. Servers are
// named "server <i> (fake)".
//
// Test-only. Thread-safe as far as the handlers are; set them before the
// first call.
#ifndef PS_WORKER_CLIENT_FAKE_TRANSPORT_H_
#define PS_WORKER_CLIENT_FAKE_TRANSPORT_H_

#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/client/transport.h"

namespace ps {

class FakeTransport final : public Transport {
 public:
  template <typename Request, typename Reply>
  using Handler = std::function<void(int server, const Request& request, absl::Time deadline,
                                     Reply* reply, Done done)>;

  explicit FakeTransport(int num_servers) : num_servers_(num_servers) {}

  Handler<proto::PushBatchRequest, proto::PushBatchResponse> on_push_batch;
  Handler<proto::InfoRequest, proto::InfoResponse> on_info;
  Handler<proto::HeartbeatRequest, proto::HeartbeatResponse> on_heartbeat;

  int num_servers() const override { return num_servers_; }
  std::string ServerName(int server) const override {
    return absl::StrCat("server ", server, " (fake)");
  }

  void Push(int, const proto::PushRequest&, absl::Span<const absl::string_view>, absl::Time,
            proto::PushResponse*, Done done) override {
    done(Unimplemented("Push"));
  }
  void Pull(int, const proto::PullRequest&, absl::Time, proto::PullResponse*, ConsumeValues,
            Done done) override {
    done(Unimplemented("Pull"));
  }
  void PushPull(int, const proto::PushPullRequest&, absl::Span<const absl::string_view>, absl::Time,
                proto::PushPullResponse*, ConsumeValues, Done done) override {
    done(Unimplemented("PushPull"));
  }
  void PushBatch(int server, const proto::PushBatchRequest& request, absl::Time deadline,
                 proto::PushBatchResponse* reply, Done done) override {
    Call(on_push_batch, "PushBatch", server, request, deadline, reply, std::move(done));
  }
  void CreateTable(int, const proto::CreateTableRequest&, absl::Time, proto::CreateTableResponse*,
                   Done done) override {
    done(Unimplemented("CreateTable"));
  }
  void Info(int server, const proto::InfoRequest& request, absl::Time deadline, bool,
            proto::InfoResponse* reply, Done done) override {
    Call(on_info, "Info", server, request, deadline, reply, std::move(done));
  }
  void Heartbeat(int server, const proto::HeartbeatRequest& request, absl::Time deadline,
                 proto::HeartbeatResponse* reply, Done done) override {
    Call(on_heartbeat, "Heartbeat", server, request, deadline, reply, std::move(done));
  }
  void Stats(int, const proto::StatsRequest&, absl::Time, proto::StatsResponse*,
             Done done) override {
    done(Unimplemented("Stats"));
  }
  void VectorOps(int, const proto::VectorOpsRequest&, absl::Time, proto::VectorOpsResponse*,
                 Done done) override {
    done(Unimplemented("VectorOps"));
  }
  void ReportProgress(int, const proto::ReportProgressRequest&, absl::Time,
                      proto::ReportProgressResponse*, Done done) override {
    done(Unimplemented("ReportProgress"));
  }

 private:
  static absl::Status Unimplemented(const char* method) {
    return absl::UnimplementedError(absl::StrCat("FakeTransport: no handler for ", method));
  }
  template <typename Request, typename Reply>
  static void Call(const Handler<Request, Reply>& handler, const char* method, int server,
                   const Request& request, absl::Time deadline, Reply* reply, Done done) {
    if (!handler) return done(Unimplemented(method));
    handler(server, request, deadline, reply, std::move(done));
  }

  const int num_servers_;
};

}  // namespace ps

#endif  // PS_WORKER_CLIENT_FAKE_TRANSPORT_H_
