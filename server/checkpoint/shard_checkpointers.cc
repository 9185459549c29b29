#include "server/checkpoint/shard_checkpointers.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ps {

void ShardCheckpointers::Handle(const proto::CheckpointRequest& request, Checkpointer::Done done) {
  if (!request.has_shard()) {
    return done(absl::InvalidArgumentError(
        "checkpoint: a replicated server takes checkpoint calls for one shard at a time; the "
        "request names none (ask with ps_admin checkpoint --etcd, which calls each shard's "
        "primary)"));
  }
  const int shard = static_cast<int>(request.shard());
  if (request.action() == proto::CHECKPOINT_ABORT) {
    std::shared_ptr<Entry> entry;
    {
      absl::MutexLock lock(&mu_);
      auto it = entries_.find(shard);
      if (it != entries_.end()) entry = it->second;
    }
    if (entry == nullptr) {
      return done(absl::FailedPreconditionError(
          absl::StrCat("checkpoint: shard ", shard, " has no cut marked here")));
    }
    return entry->checkpointer->Handle(request, std::move(done));
  }
  absl::StatusOr<std::shared_ptr<PsCore>> core = host_->ForWorker(shard);
  if (!core.ok()) return done(core.status());
  std::shared_ptr<Entry> entry;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(shard);
    if (it == entries_.end() || it->second->core.lock() != *core) {
      if (request.action() != proto::CHECKPOINT_MARK) {
        return done(absl::FailedPreconditionError(absl::StrCat(
            "checkpoint: shard ", shard,
            " has no cut marked on its current copy here (its "
            "chain moved since the MARK, or none came); the coordinator tries again")));
      }
      if (it != entries_.end()) retired_.push_back(std::move(it->second));
      auto fresh = std::make_shared<Entry>();
      fresh->core = *core;
      fresh->checkpointer =
          std::make_unique<Checkpointer>(core->get(), shard, absl::StrCat("shard ", shard));
      it = entries_.insert_or_assign(shard, std::move(fresh)).first;
    }
    entry = it->second;
    // Pinned while a cut may be marked there: Sweep lets go of it once the
    // checkpointer is idle (after the WRITE or ABORT, or a stale mark).
    entry->pinned = *core;
  }
  // The entry stays in entries_ or retired_ until its checkpointer is idle.
  entry->checkpointer->Handle(request, std::move(done));
}

void ShardCheckpointers::Sweep() {
  // Freed after the lock, on the caller's thread: a core may be a shard's
  // whole copy, and an entry's checkpointer joins its writer thread.
  std::vector<std::shared_ptr<PsCore>> unpinned;
  std::vector<std::shared_ptr<Entry>> dropped;
  absl::MutexLock lock(&mu_);
  for (auto& [shard, e] : entries_) {
    e->checkpointer->DropStaleMark();
    if (e->pinned != nullptr && e->checkpointer->Idle()) unpinned.push_back(std::move(e->pinned));
  }
  for (auto& e : retired_) {
    e->checkpointer->DropStaleMark();
    if (e->checkpointer->Idle()) dropped.push_back(std::move(e));
  }
  retired_.erase(std::remove(retired_.begin(), retired_.end(), nullptr), retired_.end());
}

}  // namespace ps
