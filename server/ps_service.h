// gRPC adapter for the ParameterServer service: converts requests, calls the
// ShardStore and the ClockTracker, converts the status.
//
// Uses the callback (reactor) API. Push and Pull are "raw" methods: they read
// the request bytes from gRPC's slices and build the reply from slices (see
// common/raw_message.h), so the float payload is copied once on each side
// instead of going through protobuf strings. Handlers do only short,
// CPU-bound work and never block: a pull (or a BSP push) that must wait for
// slower workers is parked in the ClockTracker with a callback that
// finishes the call later, on whichever thread makes it ready.
//
// Lifecycle of a parked call: its parsed request lives in a shared state
// object owned by the callback; the callback calls Finish exactly once (on
// success, at its deadline, or when the server shuts down and the tracker
// fails every wait), after which gRPC releases the call. Thread-safe.
#ifndef PS_SERVER_PS_SERVICE_H_
#define PS_SERVER_PS_SERVICE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/raw_message.h"
#include "proto/ps.grpc.pb.h"
#include "server/clock_tracker.h"
#include "server/pull_stats.h"
#include "server/shard_store.h"

namespace ps {

using PsServiceBase = proto::ParameterServer::WithCallbackMethod_CreateTable<
    proto::ParameterServer::WithRawCallbackMethod_Push<
        proto::ParameterServer::WithRawCallbackMethod_Pull<
            proto::ParameterServer::WithCallbackMethod_PushBatch<
                proto::ParameterServer::WithCallbackMethod_Info<
                    proto::ParameterServer::WithCallbackMethod_Heartbeat<
                        proto::ParameterServer::WithCallbackMethod_Stats<
                            proto::ParameterServer::Service>>>>>>>;

class PsService final : public PsServiceBase {
 public:
  // `store`, `clocks` and `stats` must outlive the service. `max_message_bytes`
  // bounds the size of a pull reply.
  PsService(ShardStore* store, ClockTracker* clocks, PullStats* stats, int64_t max_message_bytes);

  // Set once the listening port is known; used in Info and in log lines.
  void set_address(const std::string& address) { address_ = address; }

  grpc::ServerUnaryReactor* CreateTable(grpc::CallbackServerContext* ctx,
                                        const proto::CreateTableRequest* req,
                                        proto::CreateTableResponse* resp) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                 grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
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
  struct PushBody;
  struct PushCall;
  struct PullCall;

  absl::Status DoCreateTable(const proto::CreateTableRequest& req,
                             proto::CreateTableResponse* resp);
  absl::Status ApplyPush(PushCall& call);
  // Decodes a push's keys and values (the raw Push path and PushBatch share
  // it). Errors: INVALID_ARGUMENT for malformed keys or values, NOT_FOUND
  // for a clock-only push to an unknown table.
  absl::Status DecodePush(const proto::PushRequest& header, const SegmentedBytes& key_list,
                          const SegmentedBytes& values, PushBody* body) const;
  // Applies one push (validated by the store) and advances the worker's clock.
  absl::StatusOr<proto::PushResponse> Apply(const proto::PushRequest& header, const PushBody& body);
  // One push of a PushBatch, decoded from its protobuf fields.
  absl::StatusOr<proto::PushResponse> ApplyBatched(const proto::PushRequest& push);
  absl::Status ServePull(PullCall& call, uint64_t params_clock);

  ShardStore* const store_;
  ClockTracker* const clocks_;
  PullStats* const stats_;
  const int64_t max_message_bytes_;
  std::string address_;
};

}  // namespace ps

#endif  // PS_SERVER_PS_SERVICE_H_
