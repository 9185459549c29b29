#include "server/replication/shard_host.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace ps {

std::shared_ptr<PsCore> ShardHost::CoreOf(const std::shared_ptr<Replica>& replica) {
  return std::shared_ptr<PsCore>(replica, replica->core.get());
}

ShardHost::ShardHost(ShardHostOptions options)
    : options_(std::move(options)),
      process_budget_(options_.core.limits.memory_budget_bytes),
      process_parked_(options_.core.limits.max_parked_calls),
      process_key_lists_(options_.core.limits.key_list_cache_bytes, &process_budget_),
      process_history_(options_.core.limits.memory_budget_bytes / 4, &process_budget_),
      process_disk_(options_.core.limits.disk_budget_bytes == 0
                        ? ~uint64_t{0}
                        : options_.core.limits.disk_budget_bytes) {
  if (replicated()) {
    LoadKeptCopies();
    RemoveOldTierScratch();
  }
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

std::string ShardHost::TierScratchPrefix() const {
  return absl::StrCat("id", options_.server_id, "-", options_.incarnation, "-");
}

void ShardHost::RemoveOldTierScratch() const {
  const std::string& root = options_.core.limits.table_dir;
  if (root.empty()) return;
  // Copies of earlier processes of this server id: their chains have moved on.
  const std::string mine = absl::StrCat(".id", options_.server_id, "-");
  const std::string now = absl::StrCat(".", TierScratchPrefix());
  std::error_code ec;
  std::vector<std::filesystem::path> old;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".shard") != std::string::npos && name.find(mine) != std::string::npos &&
        name.find(now) == std::string::npos) {
      old.push_back(entry.path());
    }
  }
  for (const auto& path : old) {
    std::filesystem::remove_all(path, ec);
    LogEvent(Who(), absl::StrCat("removed ", path.string(),
                                 ", a tiered table's copy of an earlier process"));
  }
}

std::unique_ptr<ShardHost::Replica> ShardHost::NewReplica(int shard, bool history,
                                                          std::string scratch, bool reuse) const {
  auto replica = std::make_unique<Replica>();
  PsCoreOptions core = options_.core;
  core.server_index = shard;
  core.process_budget = &process_budget_;
  core.process_parked = &process_parked_;
  core.process_key_lists = &process_key_lists_;
  core.process_disk = &process_disk_;
  if (replicated()) {
    core.tier_scratch = !scratch.empty()
                            ? std::move(scratch)
                            : absl::StrCat(TierScratchPrefix(), copies_made_.fetch_add(1));
    core.tier_reuse = reuse;
    replica->tier_scratch = core.tier_scratch;
  }
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
  std::vector<std::shared_ptr<Replica>> unused_offers;
  {
    absl::MutexLock lock(&mu_);
    if (!replicated() || (ring_ != nullptr && ring->version() <= ring_->version())) return;
    ring_ = ring;
    const bool names_me = NamesMeLocked(*ring);
    for (int shard = 0; shard < ring->num_shards(); ++shard) {
      auto it = slots_.find(shard);
      const bool holds = ring->Holds(shard, options_.server_id);
      // A kept copy is offered when a ring naming this process makes it
      // join the shard's chain (from an existing copy), and served when the
      // ring resumes the chain from it (every server of the chain was away:
      // resumed_from names the process that held it), in place of a slot
      // made while the ring named the previous process; any other place a
      // ring naming this process gives it drops the copy.
      const proto::ShardChain& chain = ring->record().shards(shard);
      auto offer = offered_.find(shard);
      const bool member = std::find(chain.servers().begin(), chain.servers().end(),
                                    options_.server_id) != chain.servers().end();
      const bool joining = std::find(chain.joining().begin(), chain.joining().end(),
                                     options_.server_id) != chain.joining().end();
      const bool resumes = member && chain.resumed_from() != 0 && offer != offered_.end() &&
                           offer->second->kept_by == chain.resumed_from();
      const bool take_offer = offer != offered_.end() && names_me && chain.restored_at() == 0 &&
                              (joining || resumes) && (it == slots_.end() || it->second->unnamed);
      if (offer != offered_.end() && names_me && !take_offer) {
        unused_offers.push_back(std::move(offer->second));
        offered_.erase(offer);
      }
      if (take_offer && it != slots_.end()) {
        dropped.push_back(it->second);
        slots_.erase(it);
        it = slots_.end();
      }
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
        slot->unnamed = !names_me;
        slot->complete = names_me && member;
        if (chain.restored_at() > 0) {
          slot->complete = from_checkpoint != restored.end() && from_checkpoint->second != nullptr;
        }
        // A member of a resumed chain serves the kept copy it names, or
        // nothing (never an empty copy in its place).
        if (chain.resumed_from() != 0 && chain.restored_at() == 0) {
          slot->complete = slot->complete && take_offer;
        }
        if (take_offer) {
          slot->replica = std::move(offer->second);
          slot->offered = !slot->complete;
          offered_.erase(offer);
          LogEvent(Who(), absl::StrCat("shard ", shard,
                                       slot->complete ? ": serving the kept copy at "
                                                      : ": joining with the kept copy at ",
                                       slot->replica->link->position().ToString()));
        } else {
          slot->replica = slot->complete && from_checkpoint != restored.end()
                              ? std::move(from_checkpoint->second)
                              : NewReplica(shard, ring->replicas() > 1);
        }
        it = slots_.emplace(shard, std::move(slot)).first;
      }
      RetargetLocked(shard, *it->second, *ring);
    }
  }
  for (auto& slot : dropped) {
    slot->replica->Retire(absl::UnavailableError(
        absl::StrCat(Who(), " left the chain of this shard; retry at the new primary")));
  }
  for (auto& replica : unused_offers) {
    LogEvent(Who(), absl::StrCat("shard ", replica->core->server_index(),
                                 ": the kept copy is dropped (the ring does not make this server "
                                 "join the shard's chain)"));
    replica->Retire(absl::UnavailableError("a kept copy the ring did not use"));
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

}  // namespace ps
