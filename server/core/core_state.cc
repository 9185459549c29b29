#include "server/core/core_state.h"

#include <string>
#include <utility>

namespace ps {

uint64_t CoreStateIo::max_clock() const { return core_->store_.max_clock(); }

absl::Status CoreStateIo::MarkCut(uint64_t cut) { return core_->store_.MarkCut(cut); }

bool CoreStateIo::CanWriteSince(uint64_t since) { return core_->store_.CanWriteSince(since); }

void CoreStateIo::WhenCutReached(uint64_t cut, absl::Time deadline, ClockTracker::Callback ready) {
  core_->clocks_.WhenCutReached(cut, deadline, std::move(ready));
}

void CoreStateIo::CompleteCut() { core_->store_.CompleteCut(); }

absl::Status CoreStateIo::WriteCut(
    absl::FunctionRef<absl::Status(const proto::TableDef& def, std::string record)> sink,
    uint64_t since, size_t max_record_bytes, std::vector<proto::RowStoreSnapshot>* snapshots,
    const std::string& snapshot_prefix) {
  return core_->store_.WriteCut(sink, since, max_record_bytes, snapshots, snapshot_prefix);
}

void CoreStateIo::EndCut() { core_->store_.EndCut(); }

CoreState CoreStateIo::Export(uint64_t cut, bool workers) {
  CoreState state;
  state.tables = core_->store_.TableDefs();
  state.clocks = core_->clocks_.Clocks(cut);
  state.dedup = core_->dedup_.Export(cut);
  if (workers) state.workers = core_->clocks_.Leases();
  return state;
}

absl::StatusOr<bool> CoreStateIo::CreateTable(const proto::TableDef& def) {
  return core_->store_.CreateTable(def);
}

absl::Status CoreStateIo::LoadRecord(const SliceRecord& record) {
  return core_->store_.LoadRecord(record).status();
}

void CoreStateIo::SetRestoredCut(uint64_t cut) {
  if (cut > 0) core_->store_.RaiseMaxClock(cut - 1);
  core_->store_.SetRestoredCut(cut);
}

void CoreStateIo::RaiseMaxClock(uint64_t clock) { core_->store_.RaiseMaxClock(clock); }

absl::Status CoreStateIo::KeepTieredTables() { return core_->store_.KeepTieredTables(); }

bool CoreStateIo::AllTablesTiered() const { return core_->store_.AllTablesTiered(); }

absl::Status CoreStateIo::Import(const CoreState& state) {
  for (const proto::TableDef& def : state.tables) {
    if (absl::StatusOr<bool> created = CreateTable(def); !created.ok()) return created.status();
  }
  for (const ClockTracker::WorkerClock& c : state.clocks) {
    core_->clocks_.Restore(c.table, c.worker, c.clock);
  }
  for (const RequestDedup::Window& w : state.dedup) core_->dedup_.Import(w);
  for (const ClockTracker::WorkerLease& l : state.workers) {
    // A live process's registration: its lease runs out as it would have
    // on the primary (from when the copy was taken).
    (void)core_->clocks_.Register(l.worker, l.incarnation, l.clock, l.remaining);
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
