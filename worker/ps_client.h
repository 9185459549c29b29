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
#ifndef PS_WORKER_PS_CLIENT_H_
#define PS_WORKER_PS_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/placement.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/ps.grpc.pb.h"
#include "worker/param_client.h"

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
  absl::Status Pull(absl::Span<const PullRange> ops, Versions* versions = nullptr) override;
  // Pushes gradients; `clock` is the worker's clock.
  absl::Status Push(absl::Span<const PushRange> ops, uint64_t clock, Versions* versions = nullptr);

  // Arbitrary keys of a table of the given width (values key-major).
  absl::Status PullKeys(const std::string& table, absl::Span<const uint64_t> keys, uint32_t width,
                        absl::Span<float> out);
  absl::Status PushKeys(const std::string& table, absl::Span<const uint64_t> keys, uint32_t width,
                        absl::Span<const float> grads, uint64_t clock);

  int num_servers() const override { return static_cast<int>(stubs_.size()); }
  const Placement& placement() const { return placement_; }
  const PsClientOptions& options() const { return options_; }

 private:
  template <typename Request, typename Response>
  struct Call;
  using RawCall = Call<grpc::ByteBuffer, grpc::ByteBuffer>;

  explicit PsClient(const PsClientOptions& options);

  // Sends every call (in parallel), retrying retryable failures; returns the
  // first error, naming the server. `method(server, context, request,
  // response, done)` issues one asynchronous call.
  template <typename Request, typename Response, typename Method>
  absl::Status RunCalls(std::vector<Call<Request, Response>>& calls, const char* rpc_name,
                        Method method);
  // RunCalls for the raw Push or Pull method.
  absl::Status RunRaw(std::vector<RawCall>& calls, const char* rpc_name, const std::string& path);
  // Decodes the pull replies and copies their values to each call's targets;
  // records the servers' versions.
  absl::Status ScatterPullReplies(const std::vector<RawCall>& calls, size_t num_ops,
                                  Versions* versions);

  // Records the versions in the push replies.
  absl::Status RecordPushVersions(const std::vector<RawCall>& calls, size_t num_ops,
                                  Versions* versions);

  std::string ServerName(int server) const;

  const PsClientOptions options_;
  const Placement placement_;
  std::vector<std::unique_ptr<proto::ParameterServer::Stub>> stubs_;
  std::vector<std::unique_ptr<grpc::GenericStub>> generic_stubs_;
  std::atomic<uint64_t> next_request_id_;
};

}  // namespace ps

#endif  // PS_WORKER_PS_CLIENT_H_
