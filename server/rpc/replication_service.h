// The PsReplication service (proto/replication.proto) on the server's call
// queue: hands
// each Forward to the ShardHost and answers when the host's callback runs
// (once the chain's tail has the entries), and reports this server's last
// answer from etcd. No logic of its own. Thread-safe.
#ifndef PS_SERVER_RPC_REPLICATION_SERVICE_H_
#define PS_SERVER_RPC_REPLICATION_SERVICE_H_

#include "proto/replication.pb.h"
#include "server/replication/etcd_contact.h"
#include "server/replication/shard_host.h"
#include "server/rpc/authorizer.h"
#include "server/rpc/data_call_queue.h"

namespace ps {

class ReplicationService {
 public:
  // `host`, `contact` (may be null: never in touch) and `authorizer` (may
  // be null: every call allowed; else calls need the admin role) must
  // outlive the service.
  ReplicationService(ShardHost* host, const ps::EtcdContact* contact,
                     const Authorizer* authorizer = nullptr)
      : host_(host), contact_(contact), authorizer_(authorizer) {}

  // Serves PsReplication's methods from `queue` (before it starts).
  void Register(DataCallQueue* queue);

 private:
  void Forward(DataCall* call);
  void EtcdContact(DataCall* call);

  ShardHost* const host_;
  const ps::EtcdContact* const contact_;
  const Authorizer* const authorizer_;
};

}  // namespace ps

#endif  // PS_SERVER_RPC_REPLICATION_SERVICE_H_
