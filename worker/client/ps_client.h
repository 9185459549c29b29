// PsClient: a worker's connection to every parameter-server shard.
//
// It routes keys by the same Placement as the servers, splits each request by
// owning server (and into chunks of at most max_values_per_request values),
// sends all parts at once with gRPC's asynchronous callback API, and waits
// for all of them. Push and Pull use the raw wire path (common/raw_message.h):
// pushed values are sent straight from the caller's memory and pulled values
// are copied once, from gRPC's buffers into the caller's. Every call has a deadline; parts that
// fail with UNAVAILABLE or DEADLINE_EXCEEDED are retried with the same request id, so a retried
// push is applied once. Thread-safe: several threads may share one client (the trainer uses one per
// worker).
#ifndef PS_WORKER_CLIENT_PS_CLIENT_H_
#define PS_WORKER_CLIENT_PS_CLIENT_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/placement.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/ps.grpc.pb.h"
#include "worker/client/param_client.h"

namespace ps {

struct PsClientOptions {
  std::vector<std::string> servers;  // host:port, in shard order
  PlacementConfig placement;         // must match the servers' (checked)
  uint32_t worker_id = 0;
  absl::Duration timeout = absl::Seconds(10);          // per attempt
  absl::Duration connect_timeout = absl::Seconds(30);  // waiting for servers at Connect
  int max_attempts = 3;
  absl::Duration retry_backoff = absl::Milliseconds(50);
  uint64_t max_values_per_request = 1 << 20;
  // Async pushes of one request of at most this many values are batched:
  // while one PushBatch to a server is in flight, other threads' small
  // pushes to it wait and go out together in the next. 0 disables.
  uint64_t batch_max_values = 16 << 10;
  // Stamped on every pull and push: how stale the parameters a pull returns
  // may be (see proto::Consistency; staleness 0 with BOUNDED is BSP).
  proto::Consistency consistency = proto::CONSISTENCY_ASYNC;
  uint32_t staleness = 0;
  // > 0: register with every server and renew the lease by heartbeats every
  // lease / 4, so the servers count this worker in their clock minimum.
  absl::Duration lease = absl::ZeroDuration();
};

// Per-server statistics from the Stats RPC.
struct ServerStats {
  int server = 0;
  proto::StatsResponse stats;
};

class PsClient final : public ParamClient {
 public:
  // Connects to every server and checks with Info that server i is shard i of
  // the same ring. Errors: UNAVAILABLE or DEADLINE_EXCEEDED naming the server
  // that did not answer within connect_timeout; FAILED_PRECONDITION when a
  // server's index, cluster size, slice size or virtual nodes differ.
  static absl::StatusOr<std::unique_ptr<PsClient>> Connect(const PsClientOptions& options);
  ~PsClient();

  // Creates the table on every server (a no-op where an identical table
  // exists). Errors from any server, naming it.
  absl::Status CreateTable(const proto::TableDef& def) override;

  // Reads the ranges into their `out` spans. Errors name the server.
  absl::Status Pull(absl::Span<const PullRange> ops, uint64_t clock = 0,
                    PullInfo* info = nullptr) override;
  // Pushes gradients; `clock` is the worker's clock.
  absl::Status Push(absl::Span<const PushRange> ops, uint64_t clock, Versions* versions = nullptr);

  // Arbitrary keys of a table of the given width (values key-major).
  absl::Status PullKeys(const std::string& table, absl::Span<const uint64_t> keys, uint32_t width,
                        absl::Span<float> out);
  absl::Status PushKeys(const std::string& table, absl::Span<const uint64_t> keys, uint32_t width,
                        absl::Span<const float> grads, uint64_t clock);

  int num_servers() const override { return static_cast<int>(stubs_.size()); }

  // Waits until every server counts at least `n` live workers (heartbeats
  // must be on). DEADLINE_EXCEEDED naming the count reached, after `timeout`.
  absl::Status WaitForWorkers(int n, absl::Duration timeout);
  // Stops the heartbeats and tells every server this worker is done, so it
  // no longer holds back the others. Idempotent; the destructor calls it.
  void Leave();
  // The Stats of every server.
  absl::StatusOr<std::vector<ServerStats>> Stats();
  const Placement& placement() const { return placement_; }
  const PsClientOptions& options() const { return options_; }

 private:
  template <typename Request, typename Response>
  struct Call;
  using RawCall = Call<grpc::ByteBuffer, grpc::ByteBuffer>;

  explicit PsClient(const PsClientOptions& options);

  // Deadline of each attempt and how many attempts a call gets.
  struct CallPolicy {
    absl::Duration timeout;
    int max_attempts;
  };
  CallPolicy DataPolicy() const { return {options_.timeout, options_.max_attempts}; }
  // Heartbeats must not hold up the renewal of the other servers' leases:
  // one short attempt each.
  CallPolicy HeartbeatPolicy() const { return {std::min(options_.timeout, options_.lease / 2), 1}; }

  // Sends every call (in parallel), retrying retryable failures; returns the
  // first error, naming the server. `method(server, context, request,
  // response, done)` issues one asynchronous call.
  template <typename Request, typename Response, typename Method>
  absl::Status RunCalls(std::vector<Call<Request, Response>>& calls, const char* rpc_name,
                        const CallPolicy& policy, Method method);
  // RunCalls for the raw Push or Pull method.
  absl::Status RunRaw(std::vector<RawCall>& calls, const char* rpc_name, const std::string& path);
  // Decodes the pull replies and copies their values to each call's targets;
  // records the servers' versions.
  absl::Status ScatterPullReplies(const std::vector<RawCall>& calls, size_t num_ops,
                                  PullInfo* info);

  // Small-push batching (see PsClientOptions::batch_max_values): one
  // batcher per server. The first waiting thread that finds no batch in
  // flight sends everything queued and hands out the results.
  struct BatchItem {
    proto::PushRequest request;
    proto::PushResponse response;
    absl::Status status;
    bool done = false;
  };
  struct ServerBatcher {
    absl::Mutex mu;
    std::vector<BatchItem*> queue ABSL_GUARDED_BY(mu);
    bool in_flight ABSL_GUARDED_BY(mu) = false;
  };
  // Sends `item` (to `server`) in a batch; fills its response and status.
  void SubmitBatched(int server, BatchItem* item);
  void SendBatch(int server, const std::vector<BatchItem*>& batch);
  std::vector<std::unique_ptr<ServerBatcher>> batchers_;

  // Records the versions in the push replies.
  absl::Status RecordPushVersions(const std::vector<RawCall>& calls, size_t num_ops,
                                  Versions* versions);

  std::string ServerName(int server) const;

  const PsClientOptions options_;
  const Placement placement_;
  std::vector<std::unique_ptr<proto::ParameterServer::Stub>> stubs_;
  std::vector<std::unique_ptr<grpc::GenericStub>> generic_stubs_;
  std::atomic<uint64_t> next_request_id_;
  std::atomic<uint64_t> clock_{0};  // rounds pushed, sent in heartbeats
  // Round `clock` was pushed: the heartbeat clock becomes at least clock + 1.
  void NotePushed(uint64_t clock);

  // Heartbeats: one per lease / 4 to every server, from heartbeat_thread_.
  // Sends one round of heartbeats; returns the smallest live-worker count.
  absl::StatusOr<int> HeartbeatAll(bool leaving);
  void HeartbeatLoop();
  absl::Mutex heartbeat_mu_;
  bool stop_heartbeats_ ABSL_GUARDED_BY(heartbeat_mu_) = false;
  bool left_ ABSL_GUARDED_BY(heartbeat_mu_) = false;
  int live_workers_ ABSL_GUARDED_BY(heartbeat_mu_) = 0;
  std::thread heartbeat_thread_;
};

}  // namespace ps

#endif  // PS_WORKER_CLIENT_PS_CLIENT_H_
