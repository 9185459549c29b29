// Checkpointer: one server's part of checkpoints (proto/admin.proto) and its
// restore, over a PsCore's store, clocks and de-duplication state.
//
// MARK marks the cut in the store (server/cut_state.h). WRITE waits, without
// blocking a thread, until every live worker has completed the rounds below
// the cut here (ClockTracker::WhenCutReached), completes the cut, and then on
// a thread of its own writes one data file per table into the checkpoint's
// directory (server/checkpoint_files.h) and answers with its part of the
// manifest: files, worker clocks, tables and de-duplication windows. ABORT
// abandons a marked cut. The coordinator (server/checkpoint_coordinator.h)
// writes the manifest.
//
// Thread-safe; one checkpoint at a time.
#ifndef PS_SERVER_CHECKPOINT_CHECKPOINTER_H_
#define PS_SERVER_CHECKPOINT_CHECKPOINTER_H_

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/admin.pb.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/core/core_state.h"
#include "server/core/ps_core.h"

namespace ps {

class Checkpointer {
 public:
  using Done = std::function<void(absl::StatusOr<proto::CheckpointResponse>)>;

  // A cut marked this long ago whose WRITE has not come is dropped by the
  // next MARK (its coordinator went away).
  static constexpr absl::Duration kStaleMark = absl::Seconds(30);

  // `server_index` names the data files (server-<index>-table-<n>: a
  // replicated server's shards are named by shard); `name` the server or
  // shard in messages (default "server <index>").
  Checkpointer(PsCore* core, int server_index, std::string name = "")
      : core_(core),
        server_index_(server_index),
        name_(name.empty() ? absl::StrCat("server ", server_index) : std::move(name)) {}
  // Waits for a write in progress.
  ~Checkpointer();

  // MARK (cut 0: only reports max_clock), WRITE or ABORT. `done` runs once,
  // maybe before this returns, never under a lock of the core. Errors:
  // INVALID_ARGUMENT (action, or a WRITE without a directory),
  // FAILED_PRECONDITION (WRITE or ABORT of a cut that is not the one
  // marked), DEADLINE_EXCEEDED (naming the slowest worker), the write's
  // errors (naming the file).
  void Handle(const proto::CheckpointRequest& request, Done done);

  // No cut marked, none being written (a write's thread may still be
  // ending: the destructor joins it).
  bool Idle() {
    absl::MutexLock lock(&mu_);
    return marked_ == 0 && !writing_;
  }
  // Drops a cut marked kStaleMark ago or more whose WRITE has not come (its
  // coordinator went away), as the next MARK would.
  void DropStaleMark();

  // Loads the newest valid checkpoint under `root` (and the chain it is
  // applied on) into the core: tables, rows, worker clocks, de-duplication.
  // Each newer checkpoint that did not verify is described in *skipped.
  // Returns the checkpoint loaded. Errors: NOT_FOUND (none valid), those of
  // the store's LoadRecord.
  absl::StatusOr<FoundCheckpoint> Restore(const std::string& root,
                                          std::vector<std::string>* skipped);

 private:
  // Handle's actions. Write waits (WhenCutReached) for every live worker
  // to complete the rounds below the cut, then CutReached completes the
  // cut, takes the core's state and writes the part on writer_.
  void Mark(const proto::CheckpointRequest& request, Done done);
  void Abort(uint64_t cut, Done done);
  void Write(const proto::CheckpointRequest& request, Done done);
  void CutReached(const absl::Status& status, uint64_t cut, uint64_t since, const std::string& dir,
                  const Done& done);
  // Writes the completed cut into `dir` (with since > 0: what changed
  // after that cut): this server's manifest part, with the core's state
  // taken at the cut.
  absl::StatusOr<proto::CheckpointResponse> WritePart(const std::string& dir, uint64_t cut,
                                                      uint64_t since, const CoreState& state);

  PsCore* const core_;
  const int server_index_;
  const std::string name_;
  absl::Mutex mu_;
  uint64_t marked_ ABSL_GUARDED_BY(mu_) = 0;  // the cut marked here, 0: none
  absl::Time marked_at_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // a WRITE of marked_ is under way
  std::thread writer_ ABSL_GUARDED_BY(mu_);
};

// Checkpointer::Restore for several cores at once (a replicated server's
// shards): the files are read once, and each core keeps the slices its
// shard owns.
absl::StatusOr<FoundCheckpoint> RestoreCores(const std::string& root,
                                             const std::vector<PsCore*>& cores,
                                             std::vector<std::string>* skipped);

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_CHECKPOINTER_H_
