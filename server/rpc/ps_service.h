// gRPC adapter for the ParameterServer service: parses each request, calls
// the transport-free PsCore, and serializes the reply. No logic of its own.
//
// Uses the callback (reactor) API. Push, Pull and PushPull are "raw" methods: they read
// the request bytes from gRPC's slices and build the reply from slices (see
// common/raw_message.h), so the float payload is copied once on each side
// instead of going through protobuf strings. Handlers never block:
// CreateTable (which initializes a whole table) runs on the service's own
// admin thread, and a pull (or BSP push) that must wait is parked in the
// core with a callback that finishes the call later.
//
// Lifecycle of a data call: its parsed request lives in a shared Call object
// owned by the completion callback and by the reactor; the callback calls
// Finish exactly once (served, failed, at its deadline, cancelled, or at
// shutdown), after which gRPC runs OnDone and the reactor deletes itself.
// When the client cancels or goes away, OnCancel releases a parked call in
// the core at once. Thread-safe.
#ifndef PS_SERVER_RPC_PS_SERVICE_H_
#define PS_SERVER_RPC_PS_SERVICE_H_

#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "proto/ps.grpc.pb.h"
#include "server/core/ps_core.h"
#include "server/replication/shard_host.h"
#include "server/rpc/authorizer.h"

namespace ps {

using PsServiceBase = proto::ParameterServer::WithCallbackMethod_CreateTable<
    proto::ParameterServer::WithRawCallbackMethod_Push<
        proto::ParameterServer::WithRawCallbackMethod_Pull<
            proto::ParameterServer::WithRawCallbackMethod_PushPull<
                proto::ParameterServer::WithCallbackMethod_PushBatch<
                    proto::ParameterServer::WithCallbackMethod_Info<
                        proto::ParameterServer::WithCallbackMethod_Heartbeat<
                            proto::ParameterServer::WithCallbackMethod_Stats<
                                proto::ParameterServer::Service>>>>>>>>;

class PsService final : public PsServiceBase {
 public:
  // Each call goes to the core of the shard its x-ps-shard metadata names
  // (ShardHost::ForWorker), once its token has the worker role
  // (`authorizer` null: every call allowed). Both must outlive the service.
  explicit PsService(ShardHost* host, const Authorizer* authorizer = nullptr);
  // Waits for the admin thread to finish the CreateTable calls it holds.
  ~PsService() override;

  grpc::ServerUnaryReactor* CreateTable(grpc::CallbackServerContext* ctx,
                                        const proto::CreateTableRequest* req,
                                        proto::CreateTableResponse* resp) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                 grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                 grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* PushPull(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                     grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* PushBatch(grpc::CallbackServerContext* ctx,
                                      const proto::PushBatchRequest* req,
                                      proto::PushBatchResponse* resp) override;
  grpc::ServerUnaryReactor* Info(grpc::CallbackServerContext* ctx, const proto::InfoRequest* req,
                                 proto::InfoResponse* resp) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const proto::HeartbeatRequest* req,
                                      proto::HeartbeatResponse* resp) override;
  grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* ctx, const proto::StatsRequest* req,
                                  proto::StatsResponse* resp) override;

 private:
  class Reactor;
  void AdminLoop();
  // The core the call's shard metadata names (and the shard, when asked),
  // after the token check; `what` names the call in errors.
  absl::StatusOr<std::shared_ptr<PsCore>> CoreFor(grpc::CallbackServerContext* ctx,
                                                  absl::string_view what,
                                                  int* shard = nullptr) const;

  ShardHost* const host_;
  const Authorizer* const authorizer_;
  absl::Mutex admin_mu_;
  std::deque<std::function<void()>> admin_tasks_ ABSL_GUARDED_BY(admin_mu_);
  bool stopping_ ABSL_GUARDED_BY(admin_mu_) = false;
  std::thread admin_thread_;  // last: starts after the fields it uses
};

}  // namespace ps

#endif  // PS_SERVER_RPC_PS_SERVICE_H_
