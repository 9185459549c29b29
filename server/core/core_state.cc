#include "server/core/core_state.h"

namespace ps {

CoreState ExportCoreState(PsCore& core, uint64_t cut, bool workers) {
  CoreState state;
  state.tables = core.store().TableDefs();
  state.clocks = core.clocks().Clocks(cut);
  state.dedup = core.dedup().Export(cut);
  if (workers) state.workers = core.clocks().Leases();
  return state;
}

absl::Status ImportCoreState(PsCore& core, const CoreState& state) {
  for (const proto::TableDef& def : state.tables) {
    if (absl::StatusOr<bool> created = core.store().CreateTable(def); !created.ok()) {
      return created.status();
    }
  }
  for (const ClockTracker::WorkerClock& c : state.clocks) {
    core.clocks().Restore(c.table, c.worker, c.clock);
  }
  for (const RequestDedup::Window& w : state.dedup) core.dedup().Import(w);
  for (const ClockTracker::WorkerLease& l : state.workers) {
    // A live process's registration: its lease runs out as it would have
    // on the primary (from when the copy was taken).
    (void)core.clocks().Register(l.worker, l.incarnation, l.clock, l.remaining);
  }
  return absl::OkStatus();
}

void CoreStateToProto(const CoreState& state, proto::SnapshotPart* out) {
  CoreStateToProto<proto::SnapshotPart>(state, out);
  for (const ClockTracker::WorkerLease& l : state.workers) {
    proto::WorkerLease* w = out->add_workers();
    w->set_worker_id(l.worker);
    w->set_incarnation(l.incarnation);
    w->set_clock(l.clock);
    w->set_remaining_ms(absl::ToInt64Milliseconds(l.remaining));
  }
}

CoreState CoreStateFromProto(const proto::SnapshotPart& in) {
  CoreState state = CoreStateFromProto<proto::SnapshotPart>(in);
  for (const proto::WorkerLease& w : in.workers()) {
    state.workers.push_back(
        {w.worker_id(), w.incarnation(), w.clock(), absl::Milliseconds(w.remaining_ms())});
  }
  return state;
}

}  // namespace ps
