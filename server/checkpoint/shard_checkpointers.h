// ShardCheckpointers: a replicated server's part of checkpoints. The
// coordinator (server/checkpoint_coordinator.h) calls each logical shard's
// primary, naming the shard (CheckpointRequest.shard); the cut of a shard
// is taken where its writes are ordered, on the primary's core, with a
// Checkpointer (server/checkpointer.h) of that core. Its files are named by
// the shard ("server-<shard>-table-<n>"), so a checkpoint of S shards reads
// like one of S static servers: it restores onto any number of servers.
//
// MARK needs this server to be the shard's primary (ShardHost::ForWorker:
// not fenced, not stopping, the ring names it first); WRITE needs the core
// marked to be still the shard's primary copy here, else it fails (the
// chain moved: the coordinator aborts and tries again later on the new
// ring). ABORT ends the mark wherever the shard is now, so that a copy that
// moved away is not held by it. Thread-safe.
#ifndef PS_SERVER_CHECKPOINT_SHARD_CHECKPOINTERS_H_
#define PS_SERVER_CHECKPOINT_SHARD_CHECKPOINTERS_H_

#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/admin.pb.h"
#include "server/checkpoint/checkpointer.h"
#include "server/replication/shard_host.h"

namespace ps {

class ShardCheckpointers {
 public:
  // `host` must outlive this.
  explicit ShardCheckpointers(ShardHost* host) : host_(host) {}

  // MARK, WRITE or ABORT of request.shard (required). Errors: those of
  // Checkpointer::Handle; INVALID_ARGUMENT without a shard; UNAVAILABLE
  // (ForWorker's) when this server is not the shard's primary;
  // FAILED_PRECONDITION when the copy marked is no longer the one served.
  void Handle(const proto::CheckpointRequest& request, Checkpointer::Done done);

  // Drops cuts marked long ago that no WRITE or ABORT ended
  // (Checkpointer::kStaleMark), and lets go of the cores of idle
  // checkpointers. The server calls it on its ticks.
  void Sweep();

 private:
  // One shard's checkpointer over the core it was made for. The core is
  // held (pinned) only while a cut is marked or written on it: a shard that
  // moved away is not kept in memory by its last checkpoint.
  struct Entry {
    std::weak_ptr<PsCore> core;
    std::shared_ptr<PsCore> pinned;  // guarded by the ShardCheckpointers' mu_
    std::unique_ptr<Checkpointer> checkpointer;
  };

  ShardHost* const host_;
  absl::Mutex mu_;
  std::map<int, std::shared_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  // Replaced entries, kept until their checkpointer is idle (a write of the
  // previous core may still be under way). Destroyed before the host: the
  // server closes every core (failing what waits for a cut) first.
  std::vector<std::shared_ptr<Entry>> retired_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_SHARD_CHECKPOINTERS_H_
