// CheckpointCoordinator: takes a whole checkpoint of a cluster, in steps
// over every server's Checkpointer (server/checkpointer.h):
//
//  1. MARK with cut 0 asks every server the largest clock it has applied;
//     the cut is T = that + 1: it holds every push applied so far, and a
//     worker that has pushed its rounds need push nothing more.
//  2. MARK T on every server. A server that has meanwhile applied a push
//     at a clock >= T refuses; the servers marked are then sent ABORT and
//     the coordinator tries again with T further above the largest clock
//     seen (+2, +4, ...; a bounded number of times).
//  3. WRITE on every server at once: each waits until every live worker has
//     completed the rounds below T there, then writes its files into
//     ROOT/ckpt-<sequence> and answers with its part of the manifest.
//  4. The parts are merged (files; worker clocks, the smallest over the
//     servers; tables; de-duplication windows, their union) into the
//     MANIFEST, written last (CommitCheckpoint): the checkpoint becomes
//     valid. Then all but the newest `keep` are pruned.
//
// Incremental: unless asked for a full one, the checkpoint is chained to
// the newest complete one under ROOT when its chain holds fewer than
// `full_every` incremental checkpoints, every server can write what changed
// since (MARK's incremental_ok) and the new cut is above the base's (some
// clock advanced); otherwise it is full.
//
// A failure at any step leaves no MANIFEST: the previous checkpoint stays
// the newest valid one. Thread-safe; checkpoints are taken one at a time.
#ifndef PS_SERVER_CHECKPOINT_CHECKPOINT_COORDINATOR_H_
#define PS_SERVER_CHECKPOINT_CHECKPOINT_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/checkpoint/checkpoint_peer.h"

namespace ps {

struct CoordinatorOptions {
  std::string root;  // checkpoints go to root/ckpt-<sequence>
  int keep = 3;      // complete checkpoints kept (with the bases they need)
  // Incremental checkpoints chained to one full one, at most (0: always full).
  int full_every = 0;
  // How long the servers may wait for the cut's pushes; each other call's
  // deadline.
  absl::Duration write_timeout = absl::Seconds(60);
  absl::Duration call_timeout = absl::Seconds(10);
  int mark_attempts = 5;
  // The placement the cluster runs under, recorded in the manifest.
  uint64_t slice_size = 0;
  uint32_t virtual_nodes = 0;
  // With a PeerSource: ask it before every checkpoint, not only the first
  // (a replicated cluster's primaries move with its ring).
  bool ask_peers_each_time = false;
};

struct CheckpointResult {
  std::string path;
  uint64_t sequence = 0;
  uint64_t base_sequence = 0;  // 0: full
  uint64_t cut = 0;
  uint64_t bytes = 0;  // of the data files
  int files = 0;
  absl::Duration took;  // from the first MARK to the MANIFEST
  std::vector<std::string> pruned;
};

class CheckpointCoordinator {
 public:
  using Peers = std::vector<std::unique_ptr<CheckpointPeer>>;
  // Called at the first checkpoint (for a launcher that learns the servers'
  // addresses only after they started), and again after a checkpoint
  // failed; its failure fails that checkpoint.
  using PeerSource = std::function<absl::StatusOr<Peers>()>;

  // peers[i] is server i.
  CheckpointCoordinator(Peers peers, CoordinatorOptions options);
  CheckpointCoordinator(PeerSource source, CoordinatorOptions options);

  // Takes one checkpoint (a full one when `full`). Errors name the server
  // and step that failed: a server's error, ABORTED when the cut could not
  // be marked in mark_attempts tries, the file system's errors.
  absl::StatusOr<CheckpointResult> Take(bool full);

 private:
  absl::StatusOr<CheckpointResult> TakeLocked(bool full) ABSL_EXCLUSIVE_LOCKS_REQUIRED(take_mu_);
  // Steps 1-2: the cut marked on every server; *incremental_ok whether
  // every server can write what changed since `since`.
  absl::StatusOr<uint64_t> MarkEverywhere(uint64_t since, bool* incremental_ok)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(take_mu_);
  // Calls every peer in parallel; replies[i] is peer i's.
  std::vector<absl::StatusOr<proto::CheckpointResponse>> CallAll(
      const proto::CheckpointRequest& request, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(take_mu_);
  // ABORT of `cut` on the peers whose replies[i] marked it.
  void AbortMarked(uint64_t cut,
                   const std::vector<absl::StatusOr<proto::CheckpointResponse>>& replies)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(take_mu_);

  const CoordinatorOptions options_;
  const PeerSource source_;
  absl::Mutex take_mu_;  // one checkpoint at a time
  Peers peers_ ABSL_GUARDED_BY(take_mu_);
};

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_CHECKPOINT_COORDINATOR_H_
