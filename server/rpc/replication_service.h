// gRPC adapter of the PsReplication service (proto/replication.proto): hands
// each Forward to the ShardHost and answers when the host's callback runs
// (once the chain's tail has the entries), and reports this server's last
// answer from etcd. No logic of its own. Thread-safe.
#ifndef PS_SERVER_RPC_REPLICATION_SERVICE_H_
#define PS_SERVER_RPC_REPLICATION_SERVICE_H_

#include "proto/replication.grpc.pb.h"
#include "server/replication/etcd_contact.h"
#include "server/replication/shard_host.h"
#include "server/rpc/authorizer.h"

namespace ps {

class ReplicationService final : public proto::PsReplication::CallbackService {
 public:
  // `host`, `contact` (may be null: never in touch) and `authorizer` (may
  // be null: every call allowed; else calls need the admin role) must
  // outlive the service.
  ReplicationService(ShardHost* host, const ps::EtcdContact* contact,
                     const Authorizer* authorizer = nullptr)
      : host_(host), contact_(contact), authorizer_(authorizer) {}

  grpc::ServerUnaryReactor* Forward(grpc::CallbackServerContext* ctx,
                                    const proto::ForwardRequest* request,
                                    proto::ForwardResponse* response) override;
  grpc::ServerUnaryReactor* EtcdContact(grpc::CallbackServerContext* ctx,
                                        const proto::EtcdContactRequest* request,
                                        proto::EtcdContactResponse* response) override;

 private:
  ShardHost* const host_;
  const ps::EtcdContact* const contact_;
  const Authorizer* const authorizer_;
};

}  // namespace ps

#endif  // PS_SERVER_RPC_REPLICATION_SERVICE_H_
