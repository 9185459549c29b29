#include "server/shard_host.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "server/checkpoint_records.h"

namespace ps {

struct ShardHost::Replica final : public SnapshotSource {
  std::shared_ptr<PsCore> core;
  std::vector<RequestDedup::Window> windows;  // fixed by Begin
  std::vector<proto::TableDef> tables;        // fixed by Begin
  std::vector<ClockTracker::WorkerClock> clocks;  // fixed by Begin
  std::unique_ptr<ReplicaLink> link;          // last: destroyed first

  absl::Status Begin(const std::function<bool()>& after) override {
    absl::Status result;
    core->RunOrdered([&] {
      ShardStore& store = core->store();
      // No update is being applied: every one so far is below this cut.
      result = store.MarkCut(store.max_clock() + 1);
      if (!result.ok()) return;
      store.CompleteCut();
      if (!after()) {
        store.EndCut();
        return;
      }
      windows = core->dedup().Export(std::numeric_limits<uint64_t>::max());
      tables = store.TableDefs();
      clocks = core->clocks().Clocks(std::numeric_limits<uint64_t>::max());
    });
    return result;
  }

  absl::Status Write(const std::function<absl::Status(proto::ForwardEntry)>& emit) override {
    absl::Status written =
        core->store().WriteCut([&](const proto::TableDef& def, std::string record) {
          proto::ForwardEntry entry;
          proto::SnapshotPart* part = entry.mutable_snapshot();
          *part->mutable_def() = def;
          part->set_record(std::move(record));
          return emit(std::move(entry));
        });
    if (!written.ok()) return written;
    proto::ForwardEntry entry;
    proto::SnapshotPart* part = entry.mutable_snapshot();
    part->set_last(true);
    for (const proto::TableDef& def : tables) *part->add_tables() = def;
    for (const RequestDedup::Window& w : windows) {
      proto::DedupWindow* d = part->add_dedup();
      d->set_worker_id(w.worker_id);
      for (uint64_t id : w.request_ids) d->add_request_ids(id);
      d->set_forgotten_max(w.forgotten_max);
    }
    for (const ClockTracker::WorkerClock& c : clocks) {
      proto::WorkerClock* out = part->add_clocks();
      out->set_table(c.table);
      out->set_worker_id(c.worker);
      out->set_clock(c.clock);
    }
    return emit(std::move(entry));
  }
};

struct ShardHost::Slot {
  std::shared_ptr<Replica> replica;  // guarded by the host's mu_
  bool complete = false;             // guarded by the host's mu_
  absl::Mutex mu;                    // serializes the shard's Forward calls
  uint64_t stream ABSL_GUARDED_BY(mu) = 0;
  uint64_t next_seq ABSL_GUARDED_BY(mu) = 1;
};

std::shared_ptr<PsCore> ShardHost::CoreOf(const std::shared_ptr<Replica>& replica) {
  return std::shared_ptr<PsCore>(replica, replica->core.get());
}

ShardHost::ShardHost(ShardHostOptions options) : options_(std::move(options)) {
  if (!replicated()) {
    auto slot = std::make_shared<Slot>();
    slot->replica = NewReplica(options_.core.server_index);
    slot->complete = true;
    absl::MutexLock lock(&mu_);
    slots_[options_.core.server_index] = std::move(slot);
  }
}

ShardHost::~ShardHost() {
  std::map<int, std::shared_ptr<Slot>> slots;
  {
    absl::MutexLock lock(&mu_);
    slots.swap(slots_);
  }
  // Links fail what is pending (a caller may still hold a core: its link
  // goes with the last holder).
  for (auto& [shard, slot] : slots) {
    if (slot->replica->link) {
      slot->replica->link->Close(absl::UnavailableError(
          absl::StrCat(Who(), " is stopping; retry at the new primary")));
    }
  }
}

std::string ShardHost::Who() const { return absl::StrCat("ps_server id ", options_.server_id); }

std::unique_ptr<ShardHost::Replica> ShardHost::NewReplica(int shard) const {
  auto replica = std::make_unique<Replica>();
  PsCoreOptions core = options_.core;
  core.server_index = shard;
  replica->core = std::make_shared<PsCore>(core);
  if (replicated()) {
    ReplicaLink::Options link;
    link.shard = shard;
    link.self = options_.server_id;
    replica->link = std::make_unique<ReplicaLink>(link, options_.transport, replica.get(),
                                                  options_.core.clock);
    replica->core->set_replication(replica->link.get());
  }
  return replica;
}

absl::StatusOr<std::shared_ptr<PsCore>> ShardHost::ForWorker(int shard) const {
  absl::ReaderMutexLock lock(&mu_);
  if (!replicated()) {
    // The shard the client meant is checked at connect (Info reports this
    // server's index, and a client with another order is refused).
    return CoreOf(slots_.at(options_.core.server_index)->replica);
  }
  if (fenced_) {
    return absl::UnavailableError(absl::StrCat(
        Who(), " is fenced: it could not renew its etcd lease in time, so another server may "
               "have taken its shards; the client re-reads the ring"));
  }
  if (ring_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(Who(), " has not read the ring from etcd yet"));
  }
  if (shard < 0 || shard >= ring_->num_shards()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request names shard ", shard, " (x-ps-shard metadata); the ring has ",
        ring_->num_shards(), " shards"));
  }
  std::optional<uint32_t> primary = ring_->Primary(shard);
  if (primary != options_.server_id) {
    return absl::UnavailableError(absl::StrCat(
        Who(), " is not the primary of shard ", shard, " in ring version ", ring_->version(),
        primary ? absl::StrCat(" (server ", *primary, " at ", ring_->Address(*primary), " is)")
                : std::string(" (every copy of the shard is lost)"),
        "; the client re-reads the ring"));
  }
  auto it = slots_.find(shard);
  if (it == slots_.end() || !it->second->complete) {
    return absl::UnavailableError(
        absl::StrCat(Who(), " does not hold a complete copy of shard ", shard, " yet"));
  }
  return CoreOf(it->second->replica);
}

void ShardHost::RetargetLocked(int shard, Slot& slot, const ShardRing& ring) const {
  std::optional<ReplicaLink::Target> target;
  if (slot.complete) {
    if (std::optional<uint32_t> next = ring.Successor(shard, options_.server_id)) {
      target = ReplicaLink::Target{*next, ring.Address(*next), ring.Incarnation(*next)};
    }
  }
  slot.replica->link->Retarget(ring.version(), target);
}

void ShardHost::SetRing(std::shared_ptr<const ShardRing> ring) {
  std::vector<std::shared_ptr<Slot>> dropped;
  {
    absl::MutexLock lock(&mu_);
    if (!replicated() || (ring_ != nullptr && ring->version() <= ring_->version())) return;
    ring_ = ring;
    for (int shard = 0; shard < ring->num_shards(); ++shard) {
      auto it = slots_.find(shard);
      const bool holds = ring->Holds(shard, options_.server_id);
      if (!holds) {
        if (it != slots_.end()) {
          dropped.push_back(it->second);
          slots_.erase(it);
        }
        continue;
      }
      if (it == slots_.end()) {
        auto slot = std::make_shared<Slot>();
        slot->replica = NewReplica(shard);
        // In a chain without ever joining it: the first ring, all empty.
        const auto& servers = ring->record().shards(shard).servers();
        slot->complete =
            std::find(servers.begin(), servers.end(), options_.server_id) != servers.end();
        it = slots_.emplace(shard, std::move(slot)).first;
      }
      RetargetLocked(shard, *it->second, *ring);
    }
  }
  for (auto& slot : dropped) {
    slot->replica->link->Close(absl::UnavailableError(
        absl::StrCat(Who(), " left the chain of this shard; retry at the new primary")));
  }
  LogEvent(Who(), ring->Describe());
}

std::shared_ptr<const ShardRing> ShardHost::ring() const {
  absl::ReaderMutexLock lock(&mu_);
  return ring_;
}

void ShardHost::SetFenced(bool fenced) {
  absl::MutexLock lock(&mu_);
  if (fenced_ != fenced) {
    LogEvent(Who(), fenced ? "fenced: the etcd lease could not be renewed in time; refusing calls"
                           : "lease renewed: serving again");
  }
  fenced_ = fenced;
}

bool ShardHost::fenced() const {
  absl::ReaderMutexLock lock(&mu_);
  return fenced_;
}

std::vector<int> ShardHost::CompleteShards() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<int> shards;
  for (const auto& [shard, slot] : slots_) {
    if (slot->complete) shards.push_back(shard);
  }
  return shards;
}

std::vector<std::shared_ptr<PsCore>> ShardHost::Cores() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::shared_ptr<PsCore>> cores;
  for (const auto& [shard, slot] : slots_) cores.push_back(CoreOf(slot->replica));
  return cores;
}

ReplicaLink::Stats ShardHost::LinkStats() const {
  absl::ReaderMutexLock lock(&mu_);
  ReplicaLink::Stats total;
  for (const auto& [shard, slot] : slots_) {
    if (!slot->replica->link) continue;
    ReplicaLink::Stats s = slot->replica->link->stats();
    total.entries_sent += s.entries_sent;
    total.batches += s.batches;
    total.batches_resent += s.batches_resent;
    total.entries_resent += s.entries_resent;
    total.snapshots += s.snapshots;
    total.snapshot_bytes += s.snapshot_bytes;
    total.pending += s.pending;
  }
  return total;
}

std::optional<ReplicaLink::Stats> ShardHost::LinkStats(int shard) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = slots_.find(shard);
  if (!replicated() || it == slots_.end() || !it->second->replica->link) return std::nullopt;
  return it->second->replica->link->stats();
}

absl::Status ShardHost::ApplySnapshotPart(PsCore& core, const proto::SnapshotPart& part) {
  ShardStore& store = core.store();
  if (part.has_def()) {
    if (absl::StatusOr<bool> created = store.CreateTable(part.def()); !created.ok()) {
      return created.status();
    }
    absl::Status loaded = ForEachSliceRecord(part.record(), "snapshot", [&](const SliceRecord& r) {
      return store.LoadRecord(r).status();
    });
    if (!loaded.ok()) return loaded;
  }
  for (const proto::TableDef& def : part.tables()) {
    if (absl::StatusOr<bool> created = store.CreateTable(def); !created.ok()) {
      return created.status();
    }
  }
  for (const proto::DedupWindow& d : part.dedup()) {
    RequestDedup::Window w;
    w.worker_id = d.worker_id();
    w.request_ids.assign(d.request_ids().begin(), d.request_ids().end());
    w.forgotten_max = d.forgotten_max();
    core.dedup().Import(w);
  }
  for (const proto::WorkerClock& c : part.clocks()) {
    core.clocks().Restore(c.table(), c.worker_id(), c.clock());
  }
  return absl::OkStatus();
}

void ShardHost::Forward(const proto::ForwardRequest& request, ForwardDone done) {
  const int shard = static_cast<int>(request.shard());
  std::shared_ptr<Slot> slot;
  std::shared_ptr<const ShardRing> ring;
  {
    absl::ReaderMutexLock lock(&mu_);
    if (!replicated() || fenced_ || ring_ == nullptr) {
      done(absl::UnavailableError(absl::StrCat(Who(), " is not taking forwarded updates (",
                                               fenced_ ? "fenced" : "no ring yet", ")")),
           {});
      return;
    }
    ring = ring_;
    auto it = slots_.find(shard);
    if (ring->Successor(shard, request.from_server()) != options_.server_id ||
        it == slots_.end()) {
      done(absl::FailedPreconditionError(absl::StrCat(
               Who(), " is not the successor of server ", request.from_server(), " for shard ",
               shard, " in its ring version ", ring->version(), " (the sender's is ",
               request.ring_version(), ")")),
           {});
      return;
    }
    slot = it->second;
  }
  bool became_complete = false;
  std::shared_ptr<PsCore> core;
  uint64_t applied = 0;
  {
    absl::MutexLock slot_lock(&slot->mu);
    if (request.stream_id() != slot->stream) {
      if (request.first_seq() != 1) {
        done(absl::FailedPreconditionError(absl::StrCat(
                 "shard ", shard, ": stream ", request.stream_id(), " from server ",
                 request.from_server(), " is unknown here and does not start at its beginning")),
             {});
        return;
      }
      // A new stream starts with a snapshot: begin from an empty core.
      std::shared_ptr<Replica> fresh = NewReplica(shard);
      std::shared_ptr<Replica> old;
      {
        absl::MutexLock lock(&mu_);
        old = std::move(slot->replica);
        slot->replica = fresh;
        slot->complete = false;
        RetargetLocked(shard, *slot, *ring);
      }
      old->link->Close(absl::UnavailableError("replaced by a new stream"));
      slot->stream = request.stream_id();
      slot->next_seq = 1;
    }
    {
      absl::ReaderMutexLock lock(&mu_);
      core = CoreOf(slot->replica);
    }
    for (int i = 0; i < request.entries_size(); ++i) {
      const uint64_t seq = request.first_seq() + i;
      if (seq < slot->next_seq) continue;  // a resent batch: applied already
      if (seq > slot->next_seq) {
        done(absl::FailedPreconditionError(absl::StrCat("shard ", shard, ": entry ", seq,
                                                        " arrived before ", slot->next_seq)),
             {});
        return;
      }
      const proto::ForwardEntry& entry = request.entries(i);
      if (entry.has_snapshot()) {
        absl::Status s = ApplySnapshotPart(*core, entry.snapshot());
        if (!s.ok()) {
          LogEvent(Who(), absl::StrCat("shard ", shard, ": snapshot part failed: ", s.ToString()));
          done(s, {});
          return;
        }
        if (entry.snapshot().last()) became_complete = true;
      } else if (absl::Status s = core->ApplyForwarded(entry); !s.ok()) {
        // The primary applied it, so this copy now differs: say so loudly.
        LogEvent(Who(), absl::StrCat("shard ", shard, ": forwarded update ", seq,
                                     " did not apply here: ", s.ToString()));
      }
      ++slot->next_seq;
    }
    applied = slot->next_seq - 1;
  }
  bool joining = false;
  if (became_complete) {
    absl::MutexLock lock(&mu_);
    slot->complete = true;
    if (ring_ != nullptr) {
      RetargetLocked(shard, *slot, *ring_);
      const auto& j = ring_->record().shards(shard).joining();
      joining = std::find(j.begin(), j.end(), options_.server_id) != j.end();
    }
  }
  if (became_complete) {
    LogEvent(Who(), absl::StrCat("shard ", shard, ": copy complete"));
    if (joining && options_.on_synced) options_.on_synced(shard);
  }
  core->AfterReplicated([done = std::move(done), applied](absl::Status s) {
    proto::ForwardResponse response;
    response.set_applied_seq(applied);
    done(s, response);
  });
}

}  // namespace ps
