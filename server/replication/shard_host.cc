#include "server/replication/shard_host.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace ps {

struct ShardHost::Slot {
  std::shared_ptr<Replica> replica;  // guarded by the host's mu_
  bool complete = false;             // guarded by the host's mu_
  // The current stream brought the copy up to its sender's (a snapshot's
  // last part, or a catch-up): what a joining copy reports. A copy kept
  // from before (complete, but maybe behind) is not synced until then.
  bool synced = false;  // guarded by the host's mu_
  // Made while the ring named this server's previous process (constant).
  bool unnamed = false;
  absl::Mutex mu;  // serializes the shard's Forward calls
  uint64_t stream ABSL_GUARDED_BY(mu) = 0;
  uint64_t next_seq ABSL_GUARDED_BY(mu) = 1;
  // A snapshot being received: swapped in for `replica` at its last part.
  std::shared_ptr<Replica> incoming ABSL_GUARDED_BY(mu);
};

std::shared_ptr<PsCore> ShardHost::CoreOf(const std::shared_ptr<Replica>& replica) {
  return std::shared_ptr<PsCore>(replica, replica->core.get());
}

ShardHost::ShardHost(ShardHostOptions options)
    : options_(std::move(options)),
      process_budget_(options_.core.limits.memory_budget_bytes),
      process_parked_(options_.core.limits.max_parked_calls),
      process_key_lists_(options_.core.limits.key_list_cache_bytes, &process_budget_),
      process_history_(options_.core.limits.memory_budget_bytes / 4, &process_budget_) {
  if (!replicated()) {
    auto slot = std::make_shared<Slot>();
    slot->replica = NewReplica(options_.core.server_index, false);
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
      slot->replica->link->Close(
          absl::UnavailableError(absl::StrCat(Who(), " is stopping; retry at the new primary")));
    }
  }
}

void ShardHost::StopTakingWorkerCalls() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

void ShardHost::Close(const absl::Status& status) {
  std::vector<std::shared_ptr<Replica>> replicas;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    for (auto& [shard, slot] : slots_) replicas.push_back(slot->replica);
  }
  for (auto& replica : replicas) {
    if (replica->link) replica->link->Close(status);
  }
}

std::string ShardHost::Who() const { return absl::StrCat("ps_server id ", options_.server_id); }

std::unique_ptr<ShardHost::Replica> ShardHost::NewReplica(int shard, bool history) const {
  auto replica = std::make_unique<Replica>();
  PsCoreOptions core = options_.core;
  core.server_index = shard;
  core.process_budget = &process_budget_;
  core.process_parked = &process_parked_;
  core.process_key_lists = &process_key_lists_;
  replica->core = std::make_shared<PsCore>(core);
  if (replicated()) {
    ReplicaLink::Options link;
    link.shard = shard;
    link.self = options_.server_id;
    link.incarnation = options_.incarnation;
    link.history_bytes = history ? options_.history_bytes : 0;
    link.history_budget = &process_history_;
    // Batches fit the successor's message limit (the same flag on every
    // server), with room for the request's framing.
    link.max_batch_bytes = std::min<size_t>(
        link.max_batch_bytes, std::max<uint64_t>(options_.core.limits.max_message_bytes / 2, 4096));
    if (options_.stuck_after > absl::ZeroDuration()) {
      link.stuck_after = options_.stuck_after;
      link.rpc_timeout = options_.stuck_after * 2;
      link.on_stuck = [this, shard](const ReplicaLink::Target& target, const absl::Status& s) {
        if (options_.on_successor_stuck) {
          options_.on_successor_stuck(shard, target.server, target.incarnation, s);
        }
      };
    }
    replica->link =
        std::make_unique<ReplicaLink>(link, options_.transport, replica.get(), options_.core.clock);
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
  if (stopping_ || closed_) {
    return absl::UnavailableError(
        absl::StrCat(Who(),
                     " is stopping; the client re-reads the ring and retries at the new "
                     "primary"));
  }
  if (fenced_) {
    return absl::UnavailableError(
        absl::StrCat(Who(),
                     " is fenced: it could not renew its etcd lease in time, so another server may "
                     "have taken its shards; the client re-reads the ring"));
  }
  if (ring_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(Who(), " has not read the ring from etcd yet"));
  }
  if (shard < 0 || shard >= ring_->num_shards()) {
    return absl::InvalidArgumentError(absl::StrCat("the request names shard ", shard,
                                                   " (x-ps-shard metadata); the ring has ",
                                                   ring_->num_shards(), " shards"));
  }
  if (!NamesMeLocked(*ring_)) {
    return absl::UnavailableError(
        absl::StrCat(Who(), " (incarnation ", options_.incarnation, ") restarted: ring version ",
                     ring_->version(),
                     " still names its previous process, whose copies are gone; the "
                     "client re-reads the ring"));
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

bool ShardHost::NamesMeLocked(const ShardRing& ring) const {
  return ring.Incarnation(options_.server_id) == options_.incarnation;
}

void ShardHost::RetargetLocked(int shard, Slot& slot, const ShardRing& ring) const {
  std::optional<ReplicaLink::Target> target;
  const bool serving = slot.complete && NamesMeLocked(ring);
  const bool primary = serving && ring.IsPrimary(shard, options_.server_id);
  // Under the core's order lock: no update is being applied while the copy's
  // role changes (a forwarded entry is placed, or a worker's write allowed,
  // under the same lock: ReplicationLog::Place, CheckWritable).
  slot.replica->core->RunOrdered([&] {
    if (primary) {
      slot.replica->link->BecomePrimary(ring.version());
    } else {
      slot.replica->link->NotPrimary();
    }
  });
  if (serving) {
    if (std::optional<uint32_t> next = ring.Successor(shard, options_.server_id)) {
      target = ReplicaLink::Target{*next, ring.Address(*next), ring.Incarnation(*next)};
    }
  }
  slot.replica->link->Retarget(ring.version(), target);
}

std::map<int, std::shared_ptr<ShardHost::Replica>> ShardHost::RestoreFor(const ShardRing& ring) {
  std::map<int, std::shared_ptr<Replica>> restored;
  if (!options_.restore) return restored;
  {
    absl::ReaderMutexLock lock(&mu_);
    if (!replicated() || (ring_ != nullptr && ring.version() <= ring_->version()) ||
        !NamesMeLocked(ring)) {
      return restored;
    }
    for (int shard = 0; shard < ring.num_shards(); ++shard) {
      const proto::ShardChain& chain = ring.record().shards(shard);
      // Only the primary loads the checkpoint; the chain copies it on.
      if (chain.restored_at() == 0 || chain.servers().empty() ||
          chain.servers(0) != options_.server_id) {
        continue;
      }
      // A copy of its own (made since the ring named this process) is
      // never replaced: it may hold writes taken after the restore.
      auto it = slots_.find(shard);
      if (it != slots_.end() && (it->second->complete || !it->second->unnamed)) continue;
      restored[shard] = NewReplica(shard, ring.replicas() > 1);
    }
  }
  if (restored.empty()) return restored;
  // Outside the lock: reading a checkpoint may take a while, and the host
  // goes on serving its other shards meanwhile.
  std::map<int, PsCore*> cores;
  for (auto& [shard, replica] : restored) cores[shard] = replica->core.get();
  if (absl::Status s = options_.restore(cores, ring); !s.ok()) {
    LogEvent(Who(), absl::StrCat("restoring shard(s) from the newest checkpoint failed: ",
                                 s.ToString(), "; those copies stay incomplete"));
    for (auto& [shard, replica] : restored) replica = nullptr;
  }
  return restored;
}

void ShardHost::SetRing(std::shared_ptr<const ShardRing> ring) {
  std::map<int, std::shared_ptr<Replica>> restored = RestoreFor(*ring);
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
      auto from_checkpoint = restored.find(shard);
      if (from_checkpoint != restored.end() && it != slots_.end()) {
        // A slot made while the ring named this server's previous process:
        // it holds nothing; the checkpoint's copy takes its place.
        dropped.push_back(it->second);
        slots_.erase(it);
        it = slots_.end();
      }
      if (it == slots_.end()) {
        auto slot = std::make_shared<Slot>();
        // In a chain without ever joining it: the first ring, all empty;
        // unless the ring means an earlier process of this server (whose
        // copies died with it). A chain marked restored_at starts from the
        // newest checkpoint: its primary loads it (a failed restore leaves
        // the copy incomplete, not empty), the others are copied from it.
        const proto::ShardChain& chain = ring->record().shards(shard);
        const auto& servers = chain.servers();
        slot->unnamed = !NamesMeLocked(*ring);
        slot->complete = !slot->unnamed && std::find(servers.begin(), servers.end(),
                                                     options_.server_id) != servers.end();
        if (chain.restored_at() > 0) {
          slot->complete = from_checkpoint != restored.end() && from_checkpoint->second != nullptr;
        }
        slot->replica = slot->complete && from_checkpoint != restored.end()
                            ? std::move(from_checkpoint->second)
                            : NewReplica(shard, ring->replicas() > 1);
        it = slots_.emplace(shard, std::move(slot)).first;
      }
      RetargetLocked(shard, *it->second, *ring);
    }
  }
  for (auto& slot : dropped) {
    slot->replica->Retire(absl::UnavailableError(
        absl::StrCat(Who(), " left the chain of this shard; retry at the new primary")));
  }
  LogEvent(Who(), ring->Describe());
}

std::shared_ptr<const ShardRing> ShardHost::ring() const {
  absl::ReaderMutexLock lock(&mu_);
  return ring_;
}

void ShardHost::SetFenced(bool fenced) {
  std::vector<std::shared_ptr<Replica>> replicas;
  {
    absl::MutexLock lock(&mu_);
    if (fenced_ != fenced) {
      LogEvent(Who(), fenced ? "fenced: the etcd lease could not be renewed in time; refusing calls"
                             : "lease renewed: serving again");
      if (fenced) {
        for (auto& [shard, slot] : slots_) replicas.push_back(slot->replica);
      }
    }
    fenced_ = fenced;
  }
  // Parked pulls and held BSP pushes are answered no more from here: another
  // server may be promoted before the lease is back; the clients retry.
  for (auto& replica : replicas) {
    replica->core->FailWaiting(absl::UnavailableError(absl::StrCat(
        Who(),
        " is fenced (its etcd lease could not be renewed in time); the client re-reads "
        "the ring and retries")));
  }
}

bool ShardHost::fenced() const {
  absl::ReaderMutexLock lock(&mu_);
  return fenced_;
}

std::vector<int> ShardHost::SyncedShards() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<int> shards;
  for (const auto& [shard, slot] : slots_) {
    if (slot->complete && slot->synced) shards.push_back(shard);
  }
  return shards;
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
    total.catch_ups += s.catch_ups;
    total.catch_up_entries += s.catch_up_entries;
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

absl::Status ShardHost::Install(int shard, Slot& slot, std::shared_ptr<Replica> fresh,
                                bool complete) {
  std::shared_ptr<Replica> old;
  {
    absl::MutexLock lock(&mu_);
    // The ring may have made the copy being replaced the primary since the
    // snapshot began (its role changes under this lock): it may have taken
    // writes the snapshot lacks.
    if (slot.replica != fresh && slot.complete && slot.replica->link->Decides()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shard ", shard, ": this copy became the shard's primary during the snapshot; refused"));
    }
    if (slot.replica != fresh) old = std::exchange(slot.replica, std::move(fresh));
    slot.complete = complete;
    slot.synced = complete;
    if (ring_ != nullptr) RetargetLocked(shard, slot, *ring_);
  }
  if (old != nullptr) old->Retire(absl::UnavailableError("replaced by a snapshot"));
  return absl::OkStatus();
}

void ShardHost::Forward(const proto::ForwardRequest& request, ForwardDone done) {
  const int shard = static_cast<int>(request.shard());
  std::shared_ptr<Slot> slot;
  std::shared_ptr<const ShardRing> ring;
  {
    absl::ReaderMutexLock lock(&mu_);
    if (!replicated() || fenced_ || closed_ || ring_ == nullptr) {
      done(absl::UnavailableError(absl::StrCat(Who(), " is not taking forwarded updates (",
                                               closed_   ? "stopping"
                                               : fenced_ ? "fenced"
                                                         : "no ring yet",
                                               ")")),
           {});
      return;
    }
    ring = ring_;
    if (request.to_incarnation() != options_.incarnation) {
      done(absl::FailedPreconditionError(
               absl::StrCat(Who(), " is incarnation ", options_.incarnation, ", not ",
                            request.to_incarnation(), " that server ", request.from_server(),
                            " addressed (this server restarted; its copies are gone)")),
           {});
      return;
    }
    if (ring->Incarnation(request.from_server()) != request.from_incarnation()) {
      const uint64_t named = ring->Incarnation(request.from_server());
      done(absl::FailedPreconditionError(absl::StrCat(
               Who(), ": ring version ", ring->version(),
               named == 0 ? absl::StrCat(" does not name server ", request.from_server())
                          : absl::StrCat(" names incarnation ", named, " of server ",
                                         request.from_server(), ", not the sender's ",
                                         request.from_incarnation()))),
           {});
      return;
    }
    auto it = slots_.find(shard);
    if (ring->Successor(shard, request.from_server()) != options_.server_id || it == slots_.end()) {
      done(absl::FailedPreconditionError(
               absl::StrCat(Who(), " is not the successor of server ", request.from_server(),
                            " for shard ", shard, " in its ring version ", ring->version(),
                            " (the sender's is ", request.ring_version(), ")")),
           {});
      return;
    }
    slot = it->second;
  }
  bool became_complete = false;
  std::shared_ptr<PsCore> core;
  proto::ForwardResponse response;
  absl::Status refused;
  refused = Receive(shard, request, *slot, *ring, &core, &response, &became_complete);
  if (!refused.ok()) {
    done(refused, {});
    return;
  }
  bool joining = false;
  if (became_complete) {
    absl::MutexLock lock(&mu_);
    if (ring_ != nullptr) {
      const auto& j = ring_->record().shards(shard).joining();
      joining = std::find(j.begin(), j.end(), options_.server_id) != j.end();
    }
  }
  if (became_complete && joining && options_.on_synced) options_.on_synced(shard);
  // Answered once everything applied here is at the tail.
  core->AfterReplicated([done = std::move(done), response](absl::Status s) { done(s, response); });
}

// The copy a Forward call applies to, as Receive's parts change it.
struct ShardHost::Receiving {
  std::shared_ptr<Replica> replica;  // the slot's copy
  bool complete;
  bool* became_complete;
};

absl::Status ShardHost::Receive(int shard, const proto::ForwardRequest& request, Slot& slot,
                                const ShardRing& ring, std::shared_ptr<PsCore>* core,
                                proto::ForwardResponse* response, bool* became_complete) {
  absl::MutexLock slot_lock(&slot.mu);  // one Forward of the shard at a time
  Receiving in{nullptr, false, became_complete};
  {
    absl::ReaderMutexLock lock(&mu_);
    in.replica = slot.replica;
    in.complete = slot.complete;
  }
  if (request.probe()) {
    ReceiveProbe(request, slot, in, response);
    *core = CoreOf(in.replica);
    return absl::OkStatus();
  }
  if (request.stream_id() != slot.stream) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", shard, ": stream ", request.stream_id(), " from server ",
                     request.from_server(), " is unknown here (a stream starts with a probe)"));
  }
  for (int i = 0; i < request.entries_size(); ++i) {
    const uint64_t seq = request.first_seq() + i;
    if (seq < slot.next_seq) continue;  // a resent batch: applied already
    if (seq > slot.next_seq) {
      return absl::FailedPreconditionError(
          absl::StrCat("shard ", shard, ": entry ", seq, " arrived before ", slot.next_seq));
    }
    const proto::ForwardEntry& entry = request.entries(i);
    absl::Status applied =
        entry.has_snapshot()
            ? ReceiveSnapshotPart(shard, request.from_server(), entry.snapshot(), slot, ring, in)
            : ReceiveUpdate(shard, entry, slot, in);
    if (!applied.ok()) return applied;
    ++slot.next_seq;
  }
  if (request.caught_up()) CaughtUp(shard, slot, in);
  response->set_applied_seq(slot.next_seq - 1);
  *core = CoreOf(in.replica);  // the copy that holds what was applied
  return absl::OkStatus();
}

void ShardHost::ReceiveProbe(const proto::ForwardRequest& request, Slot& slot, Receiving& in,
                             proto::ForwardResponse* response) {
  slot.mu.AssertHeld();
  // A new stream: where this copy is decides what the sender sends.
  slot.stream = request.stream_id();
  slot.next_seq = 1;
  slot.incoming.reset();
  {
    absl::MutexLock lock(&mu_);
    slot.synced = false;
  }
  *response->mutable_position() = in.replica->link->position().ToProto();
  response->set_has_copy(in.complete);
}

absl::Status ShardHost::ReceiveSnapshotPart(int shard, uint32_t from_server,
                                            const proto::SnapshotPart& part, Slot& slot,
                                            const ShardRing& ring, Receiving& in) {
  slot.mu.AssertHeld();
  const LogPosition at = LogPosition::From(part.position());
  if (slot.incoming == nullptr) {
    const LogPosition mine = in.replica->link->position();
    if (in.complete && at < mine) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shard ", shard, ": a snapshot at ", at.ToString(), " from server ", from_server,
          " is behind this complete copy at ", mine.ToString(), "; refused"));
    }
    if (in.complete) {
      // Filled beside the complete copy, which stays until the last part.
      slot.incoming = NewReplica(shard, ring.replicas() > 1);
    } else {
      // An incomplete copy is worth nothing: its memory goes back to the
      // budget now, and the snapshot fills a fresh core in its place.
      std::shared_ptr<Replica> fresh = NewReplica(shard, ring.replicas() > 1);
      if (absl::Status s = Install(shard, slot, fresh, /*complete=*/false); !s.ok()) return s;
      in.replica = fresh;
      slot.incoming = fresh;
    }
  }
  if (absl::Status s = ShardReplica::ApplySnapshotPart(*slot.incoming->core, part); !s.ok()) {
    slot.incoming.reset();
    LogEvent(Who(), absl::StrCat("shard ", shard, ": snapshot part failed: ", s.ToString()));
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", shard, ": a snapshot part did not apply here: ", s.message()));
  }
  if (!part.last()) return absl::OkStatus();
  // The copy is whole: it replaces the one held until now.
  std::shared_ptr<Replica> fresh = std::move(slot.incoming);
  fresh->link->ResetPosition(at);
  if (absl::Status s = Install(shard, slot, fresh, /*complete=*/true); !s.ok()) {
    LogEvent(Who(), s.message());
    return s;
  }
  in.replica = fresh;
  in.complete = true;
  *in.became_complete = true;
  LogEvent(Who(),
           absl::StrCat("shard ", shard, ": copy complete (snapshot at ", at.ToString(), ")"));
  return absl::OkStatus();
}

absl::Status ShardHost::ReceiveUpdate(int shard, const proto::ForwardEntry& entry, Slot& slot,
                                      Receiving& in) {
  slot.mu.AssertHeld();
  if (slot.incoming != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("shard ", shard, ": entry at seq ",
                                                      entry.seq(), " arrived during a snapshot"));
  }
  // Placed in this copy's history by its log, applied and appended under
  // one hold of the core's order lock: a copy the ring just made primary
  // refuses its old predecessor's entries rather than take them for ones
  // it has (docs/experiments/2026-11-27-forward-race.md).
  bool refused = false;
  absl::Status s = in.replica->core->ApplyForwarded(entry, &refused);
  if (s.ok()) return absl::OkStatus();
  if (refused) {
    LogEvent(Who(), s.message());  // the link's message names the shard
    return s;
  }
  // The primary applied it, so this copy now differs: it is no longer a
  // copy of the shard until a snapshot replaces it.
  LogEvent(Who(), absl::StrCat("shard ", shard, ": forwarded update at seq ", entry.seq(),
                               " did not apply here: ", s.ToString(),
                               "; this copy is incomplete until a snapshot"));
  absl::MutexLock lock(&mu_);
  slot.complete = false;
  if (ring_ != nullptr) RetargetLocked(shard, slot, *ring_);
  return absl::FailedPreconditionError(absl::StrCat(
      "shard ", shard, ": the update at seq ", entry.seq(), " did not apply on server ",
      options_.server_id, ": ", s.message(), "; it needs a snapshot"));
}

void ShardHost::CaughtUp(int shard, Slot& slot, Receiving& in) {
  {
    absl::MutexLock lock(&mu_);
    const bool was_complete = slot.complete;
    slot.complete = true;
    slot.synced = true;
    if (!was_complete && ring_ != nullptr) RetargetLocked(shard, slot, *ring_);
  }
  *in.became_complete = true;
  LogEvent(Who(), absl::StrCat("shard ", shard, ": copy caught up to ",
                               in.replica->link->position().ToString()));
}

}  // namespace ps
