// ServerCheckpoints: the checkpoint side of one server: its part of each checkpoint, the restore,
// the scheduler where it coordinates, the last checkpoint at Shutdown. PsServer owns it; the
// ShardHost and core it is given must outlive it. Thread-safe.
#ifndef PS_SERVER_SERVER_CHECKPOINTS_H_
#define PS_SERVER_SERVER_CHECKPOINTS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/placement.h"
#include "common/shard_ring.h"
#include "proto/admin.pb.h"
#include "server/checkpoint/checkpoint_coordinator.h"
#include "server/checkpoint/checkpoint_scheduler.h"
#include "server/checkpoint/checkpointer.h"
#include "server/checkpoint/shard_checkpointers.h"
#include "server/core/ps_core.h"
#include "server/replication/shard_host.h"
#include "server/rpc/admin_service.h"

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

// What the checkpoint side needs of the server's options (ServerOptions).
struct ServerCheckpointsConfig {
  ServerCheckpointOptions checkpoint;
  int server_index = 0;       // static: this server (0 coordinates); names it in log lines
  int num_servers = 1;        // static: the servers whose addresses the coordinator needs
  PlacementConfig placement;  // recorded in each manifest
  bool replicated = false;    // membership in etcd (ServerReplicationOptions::kv set)
  uint32_t server_id = 0;     // replicated: this server, for "the primary of shard 0"
};

class ServerCheckpoints {
 public:
  // A replicated server started with --restore: whether a valid checkpoint
  // is there now (it is loaded at the first ring). Errors: INVALID_ARGUMENT
  // without a directory; FindNewestValidCheckpoint's (NOT_FOUND, DATA_LOSS),
  // prefixed "restore from <dir>: ".
  static absl::Status CheckRestorable(const ServerCheckpointOptions& checkpoint);

  // `host` (both kinds) and `core` (static: the server's one shard; null
  // when replicated) must outlive this.
  ServerCheckpoints(ServerCheckpointsConfig config, ShardHost* host, PsCore* core);

  // For the AdminService: MARK, WRITE and ABORT go to this server's part;
  // COORDINATE to Coordinate(). Both point into this object.
  AdminService::Handler PartHandler();
  AdminService::Handler CoordinateHandler();

  // Static, with checkpoint.restore: loads the newest valid checkpoint into
  // the core, before the server serves. Errors: INVALID_ARGUMENT without a
  // directory; the restore's (NOT_FOUND when no valid checkpoint is under
  // the directory; DATA_LOSS naming the file), prefixed "restore from <dir>: ".
  absl::Status RestoreAtStart() ABSL_LOCKS_EXCLUDED(mu_);
  // Replicated, the ShardHostOptions::restore callback: loads the newest
  // checkpoint into copies the ring made this server hold from a
  // checkpoint, and logs what was loaded, or what was lost when every copy
  // of a shard was. Errors: those of RestoreCores, prefixed as above.
  absl::Status RestoreShards(const std::map<int, PsCore*>& cores, const ShardRing& ring)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The address the server bound (host:port), once known: it names the
  // server in log lines, and a lone static server calls itself there.
  void SetAddress(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);

  // Starts the scheduler where this server may coordinate (static: server
  // 0; replicated: every server, which takes checkpoints while it is the
  // primary of shard 0), with a directory and checkpoint.coordinate; else
  // does nothing. Call once, after SetAddress. Errors: INVALID_ARGUMENT
  // when a static coordinator has neither num_servers addresses nor a
  // servers_file (which is read at the first checkpoint).
  absl::Status StartScheduler() ABSL_LOCKS_EXCLUDED(mu_);

  // COORDINATE: a checkpoint taken by the scheduler, answered when it is
  // written. Errors: FAILED_PRECONDITION when this server does not
  // coordinate; the checkpoint's.
  void Coordinate(const proto::CheckpointRequest& request, AdminService::Done done)
      ABSL_LOCKS_EXCLUDED(mu_);

  // At Shutdown, while the server still serves: the coordinator stops its
  // scheduler (a static one with on_exit takes a last checkpoint); another
  // static server with on_exit asks server 0 for one. Logs the result.
  void TakeLast() ABSL_LOCKS_EXCLUDED(mu_);

  // Replicated: ShardCheckpointers::Sweep (the ticker calls it); static: nothing.
  void Sweep();

  // The scheduler's record, for metrics; nullopt where none runs.
  std::optional<CheckpointScheduler::Record> SchedulerRecord() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // checkpoint.servers, or those of servers_file (a lone server: itself).
  // Errors: NOT_FOUND (servers_file unreadable), INVALID_ARGUMENT (its
  // contents, or not num_servers addresses).
  absl::StatusOr<std::vector<std::string>> ServerAddresses() const ABSL_LOCKS_EXCLUDED(mu_);
  // Whom the coordinator calls: the servers (static) or each shard's
  // primary in the current ring (replicated).
  absl::StatusOr<CheckpointCoordinator::Peers> Peers() const;
  CoordinatorOptions MakeCoordinatorOptions() const;
  SchedulerOptions MakeSchedulerOptions() const ABSL_LOCKS_EXCLUDED(mu_);
  CheckpointScheduler* scheduler() const ABSL_LOCKS_EXCLUDED(mu_);
  // "ps_server <index> <address>", for log lines.
  std::string Who() const ABSL_LOCKS_EXCLUDED(mu_);

  const ServerCheckpointsConfig config_;
  ShardHost* const host_;
  PsCore* const core_;  // static
  // One of the two, made by the constructor; thread-safe themselves.
  std::unique_ptr<Checkpointer> checkpointer_;               // static
  std::unique_ptr<ShardCheckpointers> shard_checkpointers_;  // replicated

  mutable absl::Mutex mu_;
  std::string address_ ABSL_GUARDED_BY(mu_);
  uint64_t restored_cut_ ABSL_GUARDED_BY(mu_) = 0;  // the cut RestoreAtStart loaded
  // Set once by StartScheduler; destroyed first (its thread ends before
  // the checkpointers go).
  std::unique_ptr<CheckpointScheduler> scheduler_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_SERVER_CHECKPOINTS_H_
