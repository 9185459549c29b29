#include "server/checkpoint/checkpointer.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/checkpoint/checkpoint_records.h"
#include "server/checkpoint/row_snapshots.h"

namespace ps {

Checkpointer::~Checkpointer() {
  std::thread writer;
  {
    absl::MutexLock lock(&mu_);
    writer = std::move(writer_);
  }
  if (writer.joinable()) writer.join();
}

void Checkpointer::DropStaleMark() {
  absl::MutexLock lock(&mu_);
  if (marked_ == 0 || writing_ || absl::Now() - marked_at_ < kStaleMark) return;
  marked_ = 0;
  CoreStateIo(core_).EndCut();
}

void Checkpointer::Handle(const proto::CheckpointRequest& request, Done done) {
  switch (request.action()) {
    case proto::CHECKPOINT_MARK:
      return Mark(request, std::move(done));
    case proto::CHECKPOINT_ABORT:
      return Abort(request.cut(), std::move(done));
    case proto::CHECKPOINT_WRITE:
      return Write(request, std::move(done));
    default:
      return done(absl::InvalidArgumentError(
          absl::StrCat("checkpoint: ", name_, " does not take action ", request.action(),
                       " (MARK, WRITE or ABORT; COORDINATE goes to the coordinator)")));
  }
}

void Checkpointer::Mark(const proto::CheckpointRequest& request, Done done) {
  CoreStateIo store(core_);
  const uint64_t cut = request.cut();
  proto::CheckpointResponse reply;
  reply.set_max_clock(store.max_clock());
  if (cut == 0) return done(reply);
  {
    absl::MutexLock lock(&mu_);
    if (marked_ != 0 && (writing_ || absl::Now() - marked_at_ < kStaleMark)) {
      return done(absl::FailedPreconditionError(
          absl::StrCat("checkpoint: ", name_, " already has a cut marked at ", marked_,
                       " (another checkpoint is being taken)")));
    }
    // A mark whose WRITE never came (its coordinator went away) is
    // dropped: it would hold slice copies for ever.
    if (marked_ != 0) store.EndCut();
    absl::Status s = store.MarkCut(cut);
    if (s.ok()) {
      marked_ = cut;
      marked_at_ = absl::Now();
      reply.set_marked(true);
      reply.set_incremental_ok(store.CanWriteSince(request.since()));
    }
  }
  reply.set_max_clock(store.max_clock());
  return done(reply);
}

void Checkpointer::Abort(uint64_t cut, Done done) {
  {
    absl::MutexLock lock(&mu_);
    if (marked_ != cut || writing_) {
      return done(absl::FailedPreconditionError(absl::StrCat(
          "checkpoint: ", name_, writing_ ? " is writing the cut at " : " has no cut marked at ",
          cut, marked_ == 0 ? std::string(" (none)") : absl::StrCat(" (it has ", marked_, ")"))));
    }
    marked_ = 0;
    // Under the lock: a MARK must not land while the slices leave the cut.
    CoreStateIo(core_).EndCut();
  }
  return done(proto::CheckpointResponse());
}

void Checkpointer::Write(const proto::CheckpointRequest& request, Done done) {
  if (request.dir().empty()) {
    return done(absl::InvalidArgumentError("checkpoint: WRITE needs the checkpoint's directory"));
  }
  CoreStateIo store(core_);
  const uint64_t cut = request.cut();
  const uint64_t since = request.since();
  {
    absl::MutexLock lock(&mu_);
    if (marked_ != cut || cut == 0 || writing_) {
      return done(absl::FailedPreconditionError(
          absl::StrCat("checkpoint: ", name_, " has no cut marked at ", cut, " to write")));
    }
    if (since != 0 && !store.CanWriteSince(since)) {
      marked_ = 0;
      store.EndCut();
      return done(absl::FailedPreconditionError(absl::StrCat(
          "checkpoint: ", name_, " cannot write what changed since cut ", since,
          ": it did not write or restore that checkpoint, or has written one on a later base")));
    }
    writing_ = true;
  }
  const absl::Duration timeout =
      request.timeout_ms() > 0 ? absl::Milliseconds(request.timeout_ms()) : absl::Seconds(60);
  store.WhenCutReached(
      cut, absl::Now() + timeout,
      [this, cut, since, dir = request.dir(), done = std::move(done)](
          absl::Status status, uint64_t) { CutReached(status, cut, since, dir, done); });
}

void Checkpointer::CutReached(const absl::Status& status, uint64_t cut, uint64_t since,
                              const std::string& dir, const Done& done) {
  if (!status.ok()) {
    {
      absl::MutexLock lock(&mu_);
      marked_ = 0;
      writing_ = false;
      CoreStateIo(core_).EndCut();
    }
    return done(status);
  }
  // Every push of the cut is in: later ones are outside it. The core's
  // state is taken now, at the cut.
  CoreStateIo io(core_);
  io.CompleteCut();
  CoreState state = io.Export(cut);
  // Files are written on a thread of their own, not on the thread of the
  // push that completed the cut.
  std::thread previous;
  absl::MutexLock lock(&mu_);
  previous = std::move(writer_);
  writer_ = std::thread([this, cut, since, dir, done, state = std::move(state),
                         previous = std::move(previous)]() mutable {
    if (previous.joinable()) previous.join();
    absl::StatusOr<proto::CheckpointResponse> part = WritePart(dir, cut, since, state);
    {
      absl::MutexLock lock(&mu_);
      marked_ = 0;
      writing_ = false;
    }
    done(std::move(part));
  });
}

absl::StatusOr<proto::CheckpointResponse> Checkpointer::WritePart(const std::string& dir,
                                                                  uint64_t cut, uint64_t since,
                                                                  const CoreState& state) {
  CoreStateIo store(core_);
  proto::CheckpointResponse reply;
  std::map<std::string, std::unique_ptr<CheckpointFileWriter>> files;
  int next_file = 0;
  auto sink = [&](const proto::TableDef& def, std::string record) -> absl::Status {
    auto it = files.find(def.name());
    if (it == files.end()) {
      absl::StatusOr<std::unique_ptr<CheckpointFileWriter>> writer = CheckpointFileWriter::Create(
          dir, absl::StrCat("server-", server_index_, "-table-", next_file++));
      if (!writer.ok()) return writer.status();
      it = files.emplace(def.name(), *std::move(writer)).first;
    }
    return it->second->Append(record);
  };
  // A full cut leaves a tiered table's rows on disk in a snapshot of its
  // store (row_snapshots.h), read by no one until a restore.
  std::vector<proto::RowStoreSnapshot> snapshots;
  if (absl::Status s = store.WriteCut(sink, since, 0, &snapshots,
                                      absl::StrCat(dir, "/server-", server_index_, "-rows-"));
      !s.ok()) {
    return s;
  }
  for (auto& [name, writer] : files) {
    absl::StatusOr<proto::CheckpointFile> entry = writer->Finish();
    if (!entry.ok()) return entry.status();
    reply.set_bytes(reply.bytes() + entry->bytes());
    *reply.add_files() = *std::move(entry);
  }
  for (proto::RowStoreSnapshot& snapshot : snapshots) {
    if (absl::Status s = DescribeRowSnapshot(dir, &snapshot); !s.ok()) return s;
    for (const proto::CheckpointFile& f : snapshot.files())
      reply.set_bytes(reply.bytes() + f.bytes());
    *reply.add_row_snapshots() = std::move(snapshot);
  }
  CoreStateToProto(state, &reply);
  reply.set_cut(cut);
  return reply;
}

absl::StatusOr<FoundCheckpoint> Checkpointer::Restore(const std::string& root,
                                                      std::vector<std::string>* skipped) {
  return RestoreCores(root, {core_}, skipped);
}

absl::StatusOr<FoundCheckpoint> RestoreCores(const std::string& root,
                                             const std::vector<PsCore*>& cores,
                                             std::vector<std::string>* skipped) {
  absl::StatusOr<std::vector<FoundCheckpoint>> chain = FindNewestValidChain(root, skipped);
  if (!chain.ok()) return chain.status();
  for (PsCore* core : cores) {
    for (const FoundCheckpoint& c : *chain) {
      for (const proto::TableDef& def : c.manifest.tables()) {
        absl::StatusOr<bool> created = CoreStateIo(core).CreateTable(def);
        if (!created.ok()) {
          return absl::Status(created.status().code(),
                              absl::StrCat("restoring ", c.path, ": ", created.status().message()));
        }
      }
    }
  }
  // One pass over the files: each store keeps the slices it owns.
  absl::Status loaded =
      ForEachChainRecord(*chain, [&](const FoundCheckpoint&, const SliceRecord& r) {
        for (PsCore* core : cores) {
          if (absl::Status s = CoreStateIo(core).LoadRecord(r); !s.ok()) return s;
        }
        return absl::OkStatus();
      });
  if (!loaded.ok()) return loaded;
  const FoundCheckpoint& found = chain->back();
  const proto::CheckpointManifest& m = found.manifest;
  for (PsCore* core : cores) {
    CoreStateIo io(core);
    // An incremental checkpoint may follow this one: what was loaded is in it.
    io.SetRestoredCut(m.cut());
    if (absl::Status s = io.Import(CoreStateFromProto(m)); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("restoring ", found.path, ": ", s.message()));
    }
    core->set_restored(found.path, m.cut());
  }
  return found;
}

}  // namespace ps
