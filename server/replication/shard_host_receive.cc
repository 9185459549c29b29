// ShardHost's receiving side (shard_host.h): Forward, the stream of
// updates and snapshots a shard's predecessor in the chain sends this copy,
// and what it does to the slot (a probe starts a stream, snapshot parts fill
// a fresh copy installed at the last part, updates apply through the core's
// log, a caught-up stream makes the copy complete). Taking a ring, serving
// workers and the slots' lifetime are in shard_host.cc.
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "server/replication/shard_host.h"

namespace ps {

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
    slot.offered = false;
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
  bool offered;  // Slot::offered
  bool* became_complete;
};

absl::Status ShardHost::Receive(int shard, const proto::ForwardRequest& request, Slot& slot,
                                const ShardRing& ring, std::shared_ptr<PsCore>* core,
                                proto::ForwardResponse* response, bool* became_complete) {
  absl::MutexLock slot_lock(&slot.mu);  // one Forward of the shard at a time
  Receiving in{nullptr, false, false, became_complete};
  {
    absl::ReaderMutexLock lock(&mu_);
    // Closed since Forward looked: KeepCopies may hold this copy's state.
    if (closed_) return absl::UnavailableError(absl::StrCat(Who(), " is stopping"));
    in.replica = slot.replica;
    in.complete = slot.complete;
    in.offered = slot.offered;
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
  // A kept copy is whole at its position, though not in the chain yet.
  response->set_has_copy(in.complete || in.offered);
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
  slot.offered = false;
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
    slot.offered = false;
    if (!was_complete && ring_ != nullptr) RetargetLocked(shard, slot, *ring_);
  }
  *in.became_complete = true;
  LogEvent(Who(), absl::StrCat("shard ", shard, ": copy caught up to ",
                               in.replica->link->position().ToString()));
}

}  // namespace ps
