#include "server/replication/shard_replica.h"

#include <limits>
#include <string>
#include <utility>

#include "server/checkpoint/checkpoint_records.h"

namespace ps {

absl::Status ShardReplica::Begin(const std::function<bool()>& after) {
  absl::Status result;
  core->RunOrdered([&] {
    CoreStateIo store(core.get());
    // No update is being applied: every one so far is below this cut.
    result = store.MarkCut(store.max_clock() + 1);
    if (!result.ok()) return;
    store.CompleteCut();
    if (!after()) {
      store.EndCut();
      return;
    }
    state = store.Export(std::numeric_limits<uint64_t>::max(), /*workers=*/true);
  });
  return result;
}

absl::Status ShardReplica::Write(const std::function<absl::Status(proto::ForwardEntry)>& emit,
                                 size_t max_record_bytes) {
  absl::Status written = CoreStateIo(core.get())
                             .WriteCut(
                                 [&](const proto::TableDef& def, std::string record) {
                                   proto::ForwardEntry entry;
                                   proto::SnapshotPart* part = entry.mutable_snapshot();
                                   *part->mutable_def() = def;
                                   part->set_record(std::move(record));
                                   return emit(std::move(entry));
                                 },
                                 /*since=*/0, max_record_bytes);
  if (!written.ok()) return written;
  proto::ForwardEntry entry;
  proto::SnapshotPart* part = entry.mutable_snapshot();
  part->set_last(true);
  CoreStateToProto(state, part);
  return emit(std::move(entry));
}

void ShardReplica::Retire(const absl::Status& why) {
  link->Close(why);
  core->FailWaiting(why);
}

absl::Status ShardReplica::ApplySnapshotPart(PsCore& core, const proto::SnapshotPart& part) {
  CoreStateIo store(&core);
  if (part.has_def()) {
    if (absl::StatusOr<bool> created = store.CreateTable(part.def()); !created.ok()) {
      return created.status();
    }
    absl::Status loaded = ForEachSliceRecord(
        part.record(), "snapshot", [&](const SliceRecord& r) { return store.LoadRecord(r); });
    if (!loaded.ok()) return loaded;
  }
  // The last part: the tables (a table may have no slice here), clocks,
  // dedup windows and worker leases at the snapshot's point.
  return store.Import(CoreStateFromProto(part));
}

}  // namespace ps
