// GrpcTransport: the Transport over gRPC, one channel per server; every call
// completes on the transport's completion queue, and done runs on the one
// thread that serves it (gRPC's callback API hands each event between two
// threads: docs/experiments/2026-11-27-grpc-threads.md). A done must not
// block.
//
// Push and Pull use the raw wire path (common/raw_message.h): pushed values
// of more than 1 MiB are sent straight from the caller's memory (zero-copy;
// done runs only once the RPC has completed AND gRPC has released every
// piece: for a peer that stopped reading, when keepalive closes the
// connection, common/grpc_channels.h); smaller ones are copied once into
// a buffer gRPC owns (see kCopiedPushBytes for why), and pulled
// values are handed to consume_values as views into gRPC's receive buffers
// (so the caller copies them once, into its own). The other methods send
// their serialized message through the same generic stub. gRPC's own
// retries are off: PsClient retries with the
// same request id. Statuses are converted from gRPC here and nowhere else in
// the client (common/grpc_status.h).
//
// Deadlines are times on `clock`; they are converted to real time when a
// call starts (so a FakeClock gives the remaining fake time as real time).
// Thread-safe.
#ifndef PS_WORKER_CLIENT_GRPC_TRANSPORT_H_
#define PS_WORKER_CLIENT_GRPC_TRANSPORT_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/peer_security.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/ps.grpc.pb.h"
#include "worker/client/shard_directory.h"
#include "worker/client/transport.h"

namespace ps {

class GrpcTransport final : public Transport {
 public:
  // Creates one channel per address (host:port, server i = addresses[i]).
  // Connects lazily: unreachable servers show at the first call.
  // `security`: TLS and token of the channels; null: the process's default
  // (common/grpc_channels.h).
  GrpcTransport(std::vector<std::string> addresses, Clock* clock = Clock::Real(),
                std::shared_ptr<const PeerSecurity> security = nullptr);
  // A replicated cluster: "server" i is shard i, and each call goes to the
  // shard's primary as the directory says when the call starts.
  GrpcTransport(std::shared_ptr<const ShardDirectory> directory, Clock* clock = Clock::Real(),
                std::shared_ptr<const PeerSecurity> security = nullptr);
  ~GrpcTransport() override;

  int num_servers() const override {
    return directory_ ? directory_->num_shards() : static_cast<int>(addresses_.size());
  }
  std::string ServerName(int server) const override;

  void Push(int server, const proto::PushRequest& header,
            absl::Span<const absl::string_view> value_pieces, absl::Time deadline,
            proto::PushResponse* reply, Done done) override;
  void Pull(int server, const proto::PullRequest& request, absl::Time deadline,
            proto::PullResponse* reply_header, ConsumeValues consume_values, Done done) override;
  void PushPull(int server, const proto::PushPullRequest& header,
                absl::Span<const absl::string_view> value_pieces, absl::Time deadline,
                proto::PushPullResponse* reply_header, ConsumeValues consume_values,
                Done done) override;
  void PushBatch(int server, const proto::PushBatchRequest& request, absl::Time deadline,
                 proto::PushBatchResponse* reply, Done done) override;
  void CreateTable(int server, const proto::CreateTableRequest& request, absl::Time deadline,
                   proto::CreateTableResponse* reply, Done done) override;
  void Info(int server, const proto::InfoRequest& request, absl::Time deadline, bool wait_for_ready,
            proto::InfoResponse* reply, Done done) override;
  void Heartbeat(int server, const proto::HeartbeatRequest& request, absl::Time deadline,
                 proto::HeartbeatResponse* reply, Done done) override;
  void Stats(int server, const proto::StatsRequest& request, absl::Time deadline,
             proto::StatsResponse* reply, Done done) override;
  void VectorOps(int server, const proto::VectorOpsRequest& request, absl::Time deadline,
                 proto::VectorOpsResponse* reply, Done done) override;
  void ReportProgress(int server, const proto::ReportProgressRequest& request, absl::Time deadline,
                      proto::ReportProgressResponse* reply, Done done) override;

 private:
  struct PushState;
  struct Stubs {
    std::unique_ptr<grpc::GenericStub> generic;
  };
  struct QueuedCall;
  // Starts a unary call of `method` on the transport's completion queue;
  // on_done runs on the queue's thread with the call's status and reply.
  void StartQueued(Stubs* stubs, std::shared_ptr<grpc::ClientContext> context,
                   const std::string& method, const grpc::ByteBuffer& request,
                   std::function<void(const grpc::Status&, const grpc::ByteBuffer&)> on_done);
  template <typename Reply>
  void TypedQueued(int server, std::shared_ptr<grpc::ClientContext> context, const char* method,
                   const google::protobuf::MessageLite& request, Reply* reply, Done done);
  void RunQueue();
  // The stubs of the server (or shard's primary) now; null when the shard
  // has no primary.
  Stubs* StubsFor(int server) const;
  // A fresh context whose deadline is `deadline` (on clock_) in real time,
  // naming the shard in its metadata.
  std::shared_ptr<grpc::ClientContext> NewContext(int server, absl::Time deadline) const;
  // done(UNAVAILABLE) for a shard without a primary.
  void NoPrimary(int server, const Done& done) const;
  static void ReleasePushPiece(void* state);
  static void FinishPush(PushState* state);
  // Sends the zero-copy push of Push and PushPull: `header` followed by
  // bytes field `field` made of the pieces; `decode` reads the reply.
  void StartPush(int server, const std::string& method, const google::protobuf::MessageLite& header,
                 int field, absl::Span<const absl::string_view> value_pieces, absl::Time deadline,
                 std::function<absl::Status(const grpc::ByteBuffer&)> decode, Done done);

  const std::vector<std::string> addresses_;
  const std::shared_ptr<const ShardDirectory> directory_;
  Clock* const clock_;
  const std::shared_ptr<const PeerSecurity> security_;
  mutable absl::Mutex mu_;
  mutable absl::flat_hash_map<std::string, std::unique_ptr<Stubs>> stubs_ ABSL_GUARDED_BY(mu_);
  // Every call completes on queue_, served by queue_thread_ (one thread: no
  // hand-off between gRPC's threads per call). The contexts of the calls in
  // flight, cancelled when the transport is destroyed.
  grpc::CompletionQueue queue_;
  absl::Mutex live_mu_;
  absl::flat_hash_set<grpc::ClientContext*> live_ ABSL_GUARDED_BY(live_mu_);
  std::thread queue_thread_;
};

}  // namespace ps

#endif  // PS_WORKER_CLIENT_GRPC_TRANSPORT_H_
