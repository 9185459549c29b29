// The ParameterServer service (proto/ps.proto) on the server's call queue:
// parses each request, calls the transport-free PsCore, and serializes the
// reply. No logic of its own.
//
// Every method is served from DataCallQueue's one thread (no hand-off
// between gRPC's threads per call). Push, Pull and PushPull are "raw": they
// read the request bytes from gRPC's slices and build the reply from slices
// (see common/raw_message.h), so the float payload is copied once on each
// side instead of going through protobuf strings. Handlers never block:
// CreateTable (which initializes a whole table) runs on the service's own
// admin thread, and a pull (or BSP push) that must wait is parked in the
// core with a callback that finishes the call later.
//
// Lifecycle of a data call: its parsed request lives in a shared state owned
// by the core's completion callbacks, the last of which finishes the call
// exactly once (served, failed, at its deadline, cancelled, or at shutdown).
// When the client cancels or goes away, a parked call is released in the
// core at once. Thread-safe.
#ifndef PS_SERVER_RPC_PS_SERVICE_H_
#define PS_SERVER_RPC_PS_SERVICE_H_

#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/metrics.h"
#include "proto/ps.pb.h"
#include "server/core/progress_board.h"
#include "server/core/ps_core.h"
#include "server/replication/shard_host.h"
#include "server/rpc/authorizer.h"
#include "server/rpc/data_call_queue.h"

namespace ps {

class PsService {
 public:
  // Each call goes to the core of the shard its x-ps-shard metadata names
  // (ShardHost::ForWorker), once its token has the worker role
  // (`authorizer` null: every call allowed). Both must outlive the service.
  // `metrics` (may be null): the process's registry, whose gRPC handling
  // times Stats reports (StatsResponse.calls).
  explicit PsService(ShardHost* host, const Authorizer* authorizer = nullptr,
                     const MetricsRegistry* metrics = nullptr);
  // Waits for the admin thread to finish the CreateTable calls it holds.
  ~PsService();

  // Serves the service's methods from `queue` (before it starts).
  void Register(DataCallQueue* queue);

 private:
  void AdminLoop();
  // The calls, on the queue's thread.
  void CreateTable(DataCall* call);
  void Push(DataCall* call);
  void Pull(DataCall* call);
  void PushPull(DataCall* call);
  void PushBatch(DataCall* call);
  void Info(DataCall* call);
  void Heartbeat(DataCall* call);
  // A call answered at once by one method of its shard's core (Info,
  // Heartbeat): the request parsed, the caller authorized for `what`, the
  // core's reply or error returned.
  template <typename Request, typename Reply>
  void AnswerFromCore(DataCall* call, const char* what,
                      absl::StatusOr<Reply> (PsCore::*method)(const Request&));
  void Stats(DataCall* call);
  void VectorOps(DataCall* call);
  void ReportProgress(DataCall* call);
  // The core the call's shard metadata names (and the shard, when asked),
  // after the token check; `what` names the call in errors.
  absl::StatusOr<std::shared_ptr<PsCore>> CoreFor(const grpc::ServerContextBase& ctx,
                                                  absl::string_view what,
                                                  int* shard = nullptr) const;

  ShardHost* const host_;
  const Authorizer* const authorizer_;
  const MetricsRegistry* const metrics_;
  // The workers' progress reports (one board for the process's shards).
  ProgressBoard progress_;
  absl::Mutex admin_mu_;
  std::deque<std::function<void()>> admin_tasks_ ABSL_GUARDED_BY(admin_mu_);
  bool stopping_ ABSL_GUARDED_BY(admin_mu_) = false;
  std::thread admin_thread_;  // last: starts after the fields it uses
};

}  // namespace ps

#endif  // PS_SERVER_RPC_PS_SERVICE_H_
