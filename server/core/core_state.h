// The one way out of and into a shard core's state, for replication
// snapshots (server/replication/shard_replica.cc) and checkpoints
// (server/checkpoint/checkpointer.cc); PsCore hands out its store, clocks
// and de-duplication windows to nothing else.
//
// CoreStateIo: the slices, by consistent cut (server/store/cut_state.h):
// mark, complete, write and end a cut; and filled back in: tables created,
// records loaded, the restored cut set.
// CoreState: what a core holds besides its slices, taken at one moment:
// the table definitions, each worker's completed clock per table, the
// de-duplication windows and the live workers' leases, written into
// whichever record carries it (SnapshotPart, CheckpointResponse and
// CheckpointManifest share the field names tables, clocks and dedup).
//
// Export with no update being applied (under the core's order lock, or at
// a checkpoint's completed cut) so that the state and the slices' copy are
// of one moment. Not thread-safe beyond what PsCore is.
#ifndef PS_SERVER_CORE_CORE_STATE_H_
#define PS_SERVER_CORE_CORE_STATE_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/ps.pb.h"
#include "proto/replication.pb.h"
#include "server/core/clock_tracker.h"
#include "server/core/ps_core.h"
#include "server/core/request_dedup.h"
#include "server/store/shard_store.h"

namespace ps {

struct CoreState {
  std::vector<proto::TableDef> tables;
  std::vector<ClockTracker::WorkerClock> clocks;
  std::vector<RequestDedup::Window> dedup;
  std::vector<ClockTracker::WorkerLease> workers;  // snapshots only
};

class CoreStateIo {
 public:
  explicit CoreStateIo(PsCore* core) : core_(core) {}

  // --- Out: cuts (ShardStore's contracts, server/store/shard_store.h).
  // The largest clock of a push applied (or being applied) here.
  uint64_t max_clock() const;
  absl::Status MarkCut(uint64_t cut);
  bool CanWriteSince(uint64_t since);
  // Runs `ready` once every live worker completed the rounds below `cut`
  // (ClockTracker::WhenCutReached); DEADLINE_EXCEEDED at `deadline`.
  void WhenCutReached(uint64_t cut, absl::Time deadline, ClockTracker::Callback ready);
  void CompleteCut();
  absl::Status WriteCut(
      absl::FunctionRef<absl::Status(const proto::TableDef& def, std::string record)> sink,
      uint64_t since = 0, size_t max_record_bytes = 0,
      std::vector<proto::RowStoreSnapshot>* snapshots = nullptr,
      const std::string& snapshot_prefix = "");
  void EndCut();
  // The core's state as of cut `cut` (clocks capped at it, dedup windows
  // as of it; UINT64_MAX: everything applied); with `workers`, the live
  // workers' leases too.
  CoreState Export(uint64_t cut = std::numeric_limits<uint64_t>::max(), bool workers = false);

  // --- In: a core being filled (a snapshot's or a checkpoint's).
  // Creates `def` here (false: it already was, alike).
  absl::StatusOr<bool> CreateTable(const proto::TableDef& def);
  // A slice record of a created table: the part of its keys owned here.
  absl::Status LoadRecord(const SliceRecord& record);
  // After every record of a checkpoint at cut `cut` was loaded: pushes up
  // to cut - 1 count as applied, and later changes are tagged after it.
  void SetRestoredCut(uint64_t cut);
  // Creates the tables, restores clocks, dedup windows and worker leases.
  // Errors: those of creating a table (RESOURCE_EXHAUSTED,
  // INVALID_ARGUMENT).
  absl::Status Import(const CoreState& state);
  // Pushes up to `clock` count as applied (a kept copy's, at its stop).
  void RaiseMaxClock(uint64_t clock);
  // A copy kept at a clean stop (ShardStore::KeepTieredTables), and
  // whether it can be (ShardStore::AllTablesTiered).
  absl::Status KeepTieredTables();
  bool AllTablesTiered() const;

 private:
  PsCore* core_;
};

// Written into, and read from, a record with repeated fields tables,
// clocks and dedup (proto::SnapshotPart, proto::CheckpointResponse,
// proto::CheckpointManifest); a SnapshotPart carries the leases as well.
template <typename Record>
void CoreStateToProto(const CoreState& state, Record* out) {
  for (const proto::TableDef& def : state.tables) *out->add_tables() = def;
  for (const ClockTracker::WorkerClock& c : state.clocks) {
    proto::WorkerClock* w = out->add_clocks();
    w->set_table(c.table);
    w->set_worker_id(c.worker);
    w->set_clock(c.clock);
  }
  for (const RequestDedup::Window& d : state.dedup) {
    proto::DedupWindow* w = out->add_dedup();
    w->set_worker_id(d.worker_id);
    w->set_forgotten_max(d.forgotten_max);
    for (uint64_t id : d.request_ids) w->add_request_ids(id);
  }
}
void CoreStateToProto(const CoreState& state, proto::SnapshotPart* out);

template <typename Record>
CoreState CoreStateFromProto(const Record& in) {
  CoreState state;
  state.tables.assign(in.tables().begin(), in.tables().end());
  for (const proto::WorkerClock& c : in.clocks()) {
    state.clocks.push_back({c.table(), c.worker_id(), c.clock()});
  }
  for (const proto::DedupWindow& d : in.dedup()) {
    state.dedup.push_back(
        {d.worker_id(), {d.request_ids().begin(), d.request_ids().end()}, d.forgotten_max()});
  }
  return state;
}
CoreState CoreStateFromProto(const proto::SnapshotPart& in);

}  // namespace ps

#endif  // PS_SERVER_CORE_CORE_STATE_H_
