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
#include "common/metrics.h"
#include "common/placement.h"
#include "grpcpp/server.h"
#include "common/clock.h"
#include "grpcpp/security/server_credentials.h"
#include "server/rpc/authorizer.h"
#include "server/rpc/admin_service.h"
#include "server/checkpoint/checkpoint_scheduler.h"
#include "server/checkpoint/checkpointer.h"
#include "server/core/ps_core.h"
#include "server/rpc/ps_service.h"
#include "server/replication/replica_link.h"
#include "server/rpc/replication_service.h"
#include "server/checkpoint/shard_checkpointers.h"
#include "server/replication/shard_host.h"
#include "server/replication/etcd_contact.h"
#include "server/replication/membership_agent.h"
#include "common/kv_store.h"
#include "server/core/server_limits.h"

namespace ps {

// Checkpoints (server/checkpointer.h): every server writes its part where
// the coordinator says; server 0 coordinates when it has a directory. In a
// replicated cluster each shard's primary writes that shard's part
// (server/shard_checkpointers.h), the primary of shard 0 coordinates, and
// the directory also lets a shard whose copies were all lost be rebuilt
// from the newest checkpoint.
struct ServerCheckpointOptions {
  std::string dir;       // checkpoints under dir/ckpt-<sequence>; empty: none
  bool restore = false;  // load the newest valid one under dir before serving
  // Server 0: coordinate checkpoints (timers, COORDINATE, the last one at
  // exit). Off, checkpoints are coordinated from outside (ps_admin --checkpoint_dir).
  bool coordinate = true;
  // Every server's address, in shard order: server 0 calls them all, and
  // the others ask server 0 for a last checkpoint when they stop. May be
  // empty with one server (it calls itself at its bound address).
  std::vector<std::string> servers;
  // Instead of `servers`: a file holding them (host:port,...), read when
  // they are first needed, for launchers that learn the ports only after
  // the servers bound them.
  std::string servers_file;
  absl::Duration every = absl::ZeroDuration();  // 0: no timer
  uint64_t every_clocks = 0;                    // 0: no clock trigger
  bool on_exit = true;                          // a last one at Shutdown
  int keep = 3;
  int full_every = 0;  // incremental checkpoints per full one (0: always full)
  absl::Duration write_timeout = absl::Seconds(60);
};

// Replicated clusters (server/membership_agent.h): membership and the ring
// in etcd, each shard on a chain of `replicas` servers.
struct ServerReplicationOptions {
  KvStore* kv = nullptr;  // null: a static cluster (server_index of num_servers)
  std::string cluster = "default";
  uint32_t server_id = 0;
  int num_shards = 1;  // for the first ring
  int num_servers = 0;  // the first ring waits for servers 0..num_servers-1 (0: num_shards)
  int replicas = 2;
  absl::Duration lease = absl::Seconds(3);
  // The address others reach this server at; empty: the bound address.
  std::string advertise_address;
  // See MembershipOptions::standby.
  bool standby = false;
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
  ShardStore& store() { return core_->store(); }
  ClockTracker& clocks() { return core_->clocks(); }

  // With a checkpoint directory and on_exit, first takes a last checkpoint
  // (server 0) or asks server 0 for one (the others), while still serving.
  void Shutdown();
  // Blocks until Shutdown() has been called and the server has stopped.
  void Wait();

 private:
  PsServer() = default;
  // Runs ClockTracker::Tick every tick_interval and logs its events, until
  // Shutdown.
  void TickLoop();
  // The gauges and counters read at scrape time (ps_server_metrics.cc).
  void CollectMetrics(MetricsWriter& out) const;
  // Restores (options_.checkpoint.restore) before the server serves.
  absl::Status Restore();
  // Replicated: loads the newest checkpoint into copies the ring made this
  // server hold from a checkpoint (ShardHostOptions::restore), and logs
  // what was loaded, or what was lost when every copy of a shard was.
  absl::Status RestoreShards(const std::map<int, PsCore*>& cores, const ShardRing& ring);
  // Server 0 with a checkpoint directory: the coordinator and its timers.
  absl::Status StartScheduler();
  void LastCheckpoint();
  // Replicated: takes no new worker call and waits (at most a lease) until
  // every write accepted is at its chain's tail.
  void DrainReplicated();
  // options_.checkpoint.servers, or those of servers_file.
  absl::StatusOr<std::vector<std::string>> ServerAddresses() const;
  void Coordinate(const proto::CheckpointRequest& request, AdminService::Done done);
  std::string Who() const;

  ServerOptions options_;
  std::string address_;
  int port_ = 0;
  std::unique_ptr<ForwardTransport> forward_transport_;
  std::unique_ptr<EtcdContact> etcd_contact_;
  std::unique_ptr<ShardHost> host_;
  std::shared_ptr<PsCore> core_;  // static clusters: the one shard
  std::unique_ptr<PsService> service_;
  std::unique_ptr<ReplicationService> replication_;
  // Set once started; read by the host's on_synced (a gRPC thread).
  absl::Mutex membership_mu_;
  std::unique_ptr<MembershipAgent> membership_ ABSL_GUARDED_BY(membership_mu_);
  std::unique_ptr<Checkpointer> checkpointer_;  // static clusters
  std::unique_ptr<ShardCheckpointers> shard_checkpointers_;  // replicated
  std::unique_ptr<AdminService> admin_;
  uint64_t restored_cut_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::thread ticker_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;   // Shutdown has begun
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;  // the ticker stops
  std::unique_ptr<CheckpointScheduler> scheduler_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_PS_SERVER_H_
