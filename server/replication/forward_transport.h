// ForwardTransport: how the replication layer (ReplicaLink, the membership
// agent) reaches another server. The layer sees only this interface; the
// gRPC implementation lives with the other RPC adapters in server/rpc/.
#ifndef PS_SERVER_REPLICATION_FORWARD_TRANSPORT_H_
#define PS_SERVER_REPLICATION_FORWARD_TRANSPORT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/replication.pb.h"

namespace ps {

// How a link reaches a server: one blocking attempt. gRPC in servers
// (server/rpc/grpc_forward_transport.h), in-process fakes in tests.
class ForwardTransport {
 public:
  virtual ~ForwardTransport() = default;
  virtual absl::StatusOr<proto::ForwardResponse> Forward(const std::string& address,
                                                         const proto::ForwardRequest& request,
                                                         absl::Duration timeout) = 0;
  // Whether the server at `address` reaches etcd (server/replication/etcd_contact.h).
  // Transports without it: UNIMPLEMENTED.
  virtual absl::StatusOr<proto::EtcdContactResponse> EtcdContact(const std::string& address,
                                                                 absl::Duration timeout) {
    return absl::UnimplementedError("this transport cannot ask servers about etcd");
  }
  // Stopping: calls in flight end now (CANCELLED), and so does every later
  // call.
  virtual void CancelAll() {}
};

}  // namespace ps

#endif  // PS_SERVER_REPLICATION_FORWARD_TRANSPORT_H_
