// A running parameter-server shard: a PsCore served over gRPC.
//
// Used by the ps_server daemon and by in-process integration tests (several
// shards in one process, each on port 0). Start() returns once the port is
// bound; Shutdown() stops accepting calls, lets in-flight calls finish, and
// is idempotent. Thread-safe.
#ifndef PS_SERVER_PS_SERVER_H_
#define PS_SERVER_PS_SERVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/kv_store.h"
#include "common/metrics.h"
#include "common/placement.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "server/core/ps_core.h"
#include "server/core/server_limits.h"
#include "server/replication/etcd_contact.h"
#include "server/replication/membership_agent.h"
#include "server/replication/replica_link.h"
#include "server/replication/shard_host.h"
#include "server/rpc/admin_service.h"
#include "server/rpc/authorizer.h"
#include "server/rpc/data_call_queue.h"
#include "server/rpc/grpc_forward_transport.h"
#include "server/rpc/health_service.h"
#include "server/rpc/ps_service.h"
#include "server/rpc/replication_service.h"
#include "server/server_checkpoints.h"
#include "server/server_ticker.h"

namespace ps {

// ServerCheckpointOptions (checkpoint directory, restore, coordination,
// timers): server/server_checkpoints.h.

// Replicated clusters (server/membership_agent.h): membership and the ring
// in etcd, each shard on a chain of `replicas` servers.
struct ServerReplicationOptions {
  KvStore* kv = nullptr;  // null: a static cluster (server_index of num_servers)
  std::string cluster = "default";
  uint32_t server_id = 0;
  int num_shards = 1;   // for the first ring
  int num_servers = 0;  // the first ring waits for servers 0..num_servers-1 (0: num_shards)
  int replicas = 2;
  absl::Duration lease = absl::Seconds(3);
  // The address others reach this server at; empty: the bound address.
  std::string advertise_address;
  // See MembershipOptions::standby.
  bool standby = false;
  // A clean stop keeps the copies of shards whose tables are all tiered on
  // disk (ShardHost::KeepCopies), and their chains wait this long for the
  // server id's next process to bring them back (zero: they go to other
  // servers at once, and the copies are kept all the same).
  absl::Duration rejoin_grace = absl::Seconds(30);
};

struct ServerOptions {
  std::string listen_address = "127.0.0.1:0";  // port 0: pick a free port
  int server_index = 0;
  int num_servers = 1;
  PlacementConfig placement;
  ServerLimits limits;
  // How often worker leases and the deadlines of waiting pulls are checked.
  absl::Duration tick_interval = absl::Milliseconds(20);
  Clock* clock = Clock::Real();
  ServerCheckpointOptions checkpoint;
  ServerReplicationOptions replication;
  // Where this server's metrics go (server/ps_server_metrics.cc): every
  // call it serves, and its tables, memory, replication and membership at
  // scrape time. Null: none kept. Must outlive the server.
  MetricsRegistry* metrics = nullptr;
  // TLS (common/peer_security.h); null: plaintext.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // Tokens and roles (server/authorizer.h); null: every call allowed. Must
  // outlive the server. The server's own calls to its peers use the
  // process's default peer security (common/grpc_channels.h).
  const Authorizer* authorizer = nullptr;
  // Serve gRPC server reflection (grpcurl, grpc_cli). Its threads poll the
  // server's sockets beside the call queue's: small calls lose about a
  // third of their speed (docs/ops/tuning.md).
  bool grpc_reflection = false;
};

class PsServer {
 public:
  // Errors: INVALID_ARGUMENT (index outside [0, num_servers), a coordinator
  // without the servers' addresses), UNAVAILABLE (the address could not be
  // bound; the message names it), the restore's (NOT_FOUND when no valid
  // checkpoint is under the directory; DATA_LOSS naming the file).
  static absl::StatusOr<std::unique_ptr<PsServer>> Start(const ServerOptions& options);
  ~PsServer();

  // OK when the server serves its shards; else why not (before the first
  // ring, fenced, shutting down): the readiness probe's answer.
  absl::Status Readiness() const;

  // host:port actually bound.
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  // Static clusters: the server's one shard. (Replicated: the host's.)
  PsCore& core() { return *core_; }
  ShardHost& host() { return *host_; }

  // With a checkpoint directory and on_exit, first takes a last checkpoint
  // (server 0) or asks server 0 for one (the others), while still serving.
  void Shutdown();
  // Blocks until Shutdown() has been called and the server has stopped.
  void Wait();

 private:
  PsServer() = default;
  // Start's steps, in order. Errors: those of Start.
  static absl::Status CheckOptions(const ServerOptions& options);
  // The host and its cores; the checkpoint side, which restores a static
  // server's shard here.
  absl::Status StartHost();
  // The cores' template; replicated, also makes the forward transport and
  // etcd contact, and hooks the host to membership and checkpoints.
  ShardHostOptions HostOptions();
  // The gRPC services (data path, replication, admin).
  void MakeServices();
  // Binds and starts the gRPC server; learns the bound address.
  absl::Status StartGrpc();
  // Replicated: registers in etcd and follows the ring.
  absl::Status JoinMembership();
  MembershipOptions MembershipConfig() const;
  ServerCheckpointsConfig CheckpointsConfig() const;

  // The gauges and counters read at scrape time (ps_server_metrics.cc).
  void CollectMetrics(MetricsWriter& out) const;
  // Replicated: takes no new worker call and waits (at most a lease) until
  // every write accepted is at its chain's tail.
  void DrainReplicated();

  // Set by Start, before the server serves; const afterwards. Destroyed in
  // reverse: the ticker first, then the gRPC server and its services.
  ServerOptions options_;
  std::string address_;
  int port_ = 0;
  uint64_t incarnation_ = 0;  // replicated: this process's (ShardHostOptions)
  std::unique_ptr<ForwardTransport> forward_transport_;
  std::unique_ptr<EtcdContact> etcd_contact_;
  std::unique_ptr<ShardHost> host_;
  std::shared_ptr<PsCore> core_;  // static clusters: the one shard
  std::unique_ptr<PsService> service_;
  std::unique_ptr<ReplicationService> replication_;
  // Set once started; read by the host's on_synced (a gRPC thread).
  absl::Mutex membership_mu_;
  std::unique_ptr<MembershipAgent> membership_ ABSL_GUARDED_BY(membership_mu_);
  // Before the host serves: its restore callback (replicated) calls it.
  std::unique_ptr<ServerCheckpoints> checkpoints_;
  std::unique_ptr<AdminService> admin_;
  // Every call is served from this queue's thread; declared before server_
  // so that it outlives it.
  DataCallQueue calls_;
  HealthService health_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<ServerTicker> ticker_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // Shutdown has begun
};

}  // namespace ps

#endif  // PS_SERVER_PS_SERVER_H_
