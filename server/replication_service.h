// gRPC adapter of the PsReplication service (proto/replication.proto): hands
// each Forward to the ShardHost and answers when the host's callback runs
// (once the chain's tail has the entries). No logic of its own. Thread-safe.
#ifndef PS_SERVER_REPLICATION_SERVICE_H_
#define PS_SERVER_REPLICATION_SERVICE_H_

#include "proto/replication.grpc.pb.h"
#include "server/shard_host.h"

namespace ps {

class ReplicationService final : public proto::PsReplication::CallbackService {
 public:
  // `host` must outlive the service.
  explicit ReplicationService(ShardHost* host) : host_(host) {}

  grpc::ServerUnaryReactor* Forward(grpc::CallbackServerContext* ctx,
                                    const proto::ForwardRequest* request,
                                    proto::ForwardResponse* response) override;

 private:
  ShardHost* const host_;
};

}  // namespace ps

#endif  // PS_SERVER_REPLICATION_SERVICE_H_
