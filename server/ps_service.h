// gRPC adapter for the ParameterServer service: converts requests, calls the
// ShardStore, converts the status. Holds no state beyond what Info reports.
//
// Uses the callback (reactor) API. Push and Pull are "raw" methods: they read
// the request bytes from gRPC's slices and build the reply from slices (see
// common/raw_message.h), so the float payload is copied once on each side
// instead of going through protobuf strings. Handlers run on gRPC's callback
// threads and do only short, CPU-bound work (validate, apply, copy); they
// never wait. Thread-safe (the store is).
#ifndef PS_SERVER_PS_SERVICE_H_
#define PS_SERVER_PS_SERVICE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "proto/ps.grpc.pb.h"
#include "server/shard_store.h"

namespace ps {

using PsServiceBase = proto::ParameterServer::WithCallbackMethod_CreateTable<
    proto::ParameterServer::WithRawCallbackMethod_Push<
        proto::ParameterServer::WithRawCallbackMethod_Pull<
            proto::ParameterServer::WithCallbackMethod_Info<proto::ParameterServer::Service>>>>;

class PsService final : public PsServiceBase {
 public:
  // `store` must outlive the service. `max_message_bytes` bounds the size of
  // a pull reply.
  PsService(ShardStore* store, int64_t max_message_bytes);

  // Set once the listening port is known; used in Info and in log lines.
  void set_address(const std::string& address) { address_ = address; }

  grpc::ServerUnaryReactor* CreateTable(grpc::CallbackServerContext* ctx,
                                        const proto::CreateTableRequest* req,
                                        proto::CreateTableResponse* resp) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                 grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                 grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* Info(grpc::CallbackServerContext* ctx, const proto::InfoRequest* req,
                                 proto::InfoResponse* resp) override;

 private:
  absl::Status DoCreateTable(const proto::CreateTableRequest& req,
                             proto::CreateTableResponse* resp);
  absl::Status DoPush(const grpc::ByteBuffer& req, grpc::ByteBuffer* resp);
  absl::Status DoPull(const grpc::ByteBuffer& req, grpc::ByteBuffer* resp);

  ShardStore* const store_;
  const int64_t max_message_bytes_;
  std::string address_;
};

}  // namespace ps

#endif  // PS_SERVER_PS_SERVICE_H_
