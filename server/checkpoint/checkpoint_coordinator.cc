#include "server/checkpoint/checkpoint_coordinator.h"

#include <algorithm>
#include <map>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_records.h"

namespace ps {
namespace {

// The first error of `replies`, or OK.
absl::Status FirstError(const std::vector<absl::StatusOr<proto::CheckpointResponse>>& replies) {
  for (const auto& r : replies) {
    if (!r.ok()) return r.status();
  }
  return absl::OkStatus();
}

absl::Status Prefixed(const absl::Status& status, absl::string_view what) {
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

// The servers' parts merged into the manifest's lists.
void MergeParts(const std::vector<absl::StatusOr<proto::CheckpointResponse>>& parts,
                proto::CheckpointManifest* manifest, uint64_t* bytes) {
  std::map<std::tuple<std::string, uint32_t>, uint64_t> clocks;  // (table, worker): min
  std::map<std::string, const proto::TableDef*> tables;
  std::map<uint32_t, std::pair<std::set<uint64_t>, uint64_t>> dedup;  // ids, forgotten_max
  for (const auto& part : parts) {
    *bytes += part->bytes();
    for (const proto::CheckpointFile& f : part->files()) *manifest->add_files() = f;
    for (const proto::RowStoreSnapshot& r : part->row_snapshots())
      *manifest->add_row_snapshots() = r;
    for (const proto::WorkerClock& c : part->clocks()) {
      auto [it, fresh] = clocks.try_emplace({c.table(), c.worker_id()}, c.clock());
      if (!fresh) it->second = std::min(it->second, c.clock());
    }
    for (const proto::TableDef& def : part->tables()) tables.try_emplace(def.name(), &def);
    for (const proto::DedupWindow& d : part->dedup()) {
      auto& [ids, forgotten] = dedup[d.worker_id()];
      ids.insert(d.request_ids().begin(), d.request_ids().end());
      forgotten = std::max(forgotten, d.forgotten_max());
    }
  }
  for (const auto& [key, clock] : clocks) {
    proto::WorkerClock* c = manifest->add_clocks();
    c->set_table(std::get<0>(key));
    c->set_worker_id(std::get<1>(key));
    c->set_clock(clock);
  }
  for (const auto& [name, def] : tables) *manifest->add_tables() = *def;
  for (const auto& [worker, window] : dedup) {
    proto::DedupWindow* d = manifest->add_dedup();
    d->set_worker_id(worker);
    d->mutable_request_ids()->Add(window.first.begin(), window.first.end());
    d->set_forgotten_max(window.second);
  }
}

}  // namespace

CheckpointCoordinator::CheckpointCoordinator(Peers peers, CoordinatorOptions options)
    : options_(std::move(options)), peers_(std::move(peers)) {}

CheckpointCoordinator::CheckpointCoordinator(PeerSource source, CoordinatorOptions options)
    : options_(std::move(options)), source_(std::move(source)) {}

std::vector<absl::StatusOr<proto::CheckpointResponse>> CheckpointCoordinator::CallAll(
    const proto::CheckpointRequest& request, absl::Duration timeout) {
  std::vector<absl::StatusOr<proto::CheckpointResponse>> replies(peers_.size(),
                                                                 absl::UnknownError("not called"));
  std::vector<std::thread> threads;
  threads.reserve(peers_.size());
  for (size_t i = 0; i < peers_.size(); ++i) {
    // The threads are joined before take_mu_ is released.
    CheckpointPeer* peer = peers_[i].get();
    threads.emplace_back([&, peer, i] { replies[i] = peer->Call(request, timeout); });
  }
  for (std::thread& t : threads) t.join();
  return replies;
}

void CheckpointCoordinator::AbortMarked(
    uint64_t cut, const std::vector<absl::StatusOr<proto::CheckpointResponse>>& replies) {
  proto::CheckpointRequest abort;
  abort.set_action(proto::CHECKPOINT_ABORT);
  abort.set_cut(cut);
  for (size_t i = 0; i < peers_.size(); ++i) {
    // A failed ABORT leaves that server's cut marked until its next MARK is
    // refused; the checkpoint has failed either way.
    if (replies[i].ok() && replies[i]->marked())
      (void)peers_[i]->Call(abort, options_.call_timeout);
  }
}

absl::StatusOr<uint64_t> CheckpointCoordinator::MarkEverywhere(uint64_t since,
                                                               bool* incremental_ok) {
  proto::CheckpointRequest query;
  query.set_action(proto::CHECKPOINT_MARK);
  uint64_t max_clock = 0;
  for (const auto& reply : CallAll(query, options_.call_timeout)) {
    if (!reply.ok()) return Prefixed(reply.status(), "checkpoint: asking for the clocks");
    max_clock = std::max(max_clock, reply->max_clock());
  }
  for (int attempt = 0; attempt < options_.mark_attempts; ++attempt) {
    // Just above every push applied, so that idle workers need push
    // nothing more; after a refusal (pushes kept coming), further ahead.
    const uint64_t cut = max_clock + (uint64_t{1} << std::min(attempt, 20));
    proto::CheckpointRequest mark;
    mark.set_action(proto::CHECKPOINT_MARK);
    mark.set_cut(cut);
    mark.set_since(since);
    std::vector<absl::StatusOr<proto::CheckpointResponse>> replies =
        CallAll(mark, options_.call_timeout);
    bool all_marked = true;
    *incremental_ok = since != 0;
    for (const auto& reply : replies) {
      if (!reply.ok() || !reply->marked()) all_marked = false;
      if (reply.ok()) {
        max_clock = std::max(max_clock, reply->max_clock());
        *incremental_ok = *incremental_ok && reply->incremental_ok();
      }
    }
    if (all_marked) return cut;
    AbortMarked(cut, replies);
    if (absl::Status s = FirstError(replies); !s.ok()) {
      return Prefixed(s, absl::StrCat("checkpoint: marking the cut at ", cut));
    }
  }
  return absl::AbortedError(absl::StrCat(
      "checkpoint: no cut could be marked in ", options_.mark_attempts,
      " attempts: the servers' clocks kept passing it (last clock seen ", max_clock, ")"));
}

absl::StatusOr<CheckpointResult> CheckpointCoordinator::Take(bool full) {
  absl::MutexLock lock(&take_mu_);
  if (source_ && options_.ask_peers_each_time) peers_.clear();
  absl::StatusOr<CheckpointResult> result = TakeLocked(full);
  // The servers may have moved (a launcher rewrote their addresses): ask
  // the source again next time.
  if (!result.ok() && source_) peers_.clear();
  return result;
}

absl::StatusOr<CheckpointResult> CheckpointCoordinator::TakeLocked(bool full) {
  if (peers_.empty() && source_) {
    absl::StatusOr<Peers> peers = source_();
    if (!peers.ok()) return Prefixed(peers.status(), "checkpoint: finding the servers");
    peers_ = *std::move(peers);
  }
  if (peers_.empty()) return absl::FailedPreconditionError("checkpoint: no servers to call");
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<CheckpointDir>> dirs = ListCheckpoints(options_.root);
  if (!dirs.ok()) return dirs.status();
  CheckpointResult result;
  result.sequence = dirs->empty() ? 1 : dirs->back().sequence + 1;
  // The base: the newest complete checkpoint, if its chain is short enough.
  uint64_t since = 0, base_sequence = 0;
  for (auto it = dirs->rbegin(); !full && options_.full_every > 0 && it != dirs->rend(); ++it) {
    if (!it->has_manifest) continue;
    absl::StatusOr<std::vector<FoundCheckpoint>> chain = CheckpointChain(it->path);
    if (chain.ok() && chain->size() <= static_cast<size_t>(options_.full_every)) {
      since = chain->back().manifest.cut();
      base_sequence = it->sequence;
    }
    break;
  }

  bool incremental_ok = false;
  absl::StatusOr<uint64_t> cut = MarkEverywhere(since, &incremental_ok);
  if (!cut.ok()) return cut.status();
  // An increment holds the changes tagged above its base's cut; pushes in a
  // cut equal to the base's (no clock has advanced since) would be tagged
  // with the base's own cut and missed: such a checkpoint is full.
  if (!incremental_ok || *cut <= since) since = base_sequence = 0;
  result.cut = *cut;
  result.base_sequence = base_sequence;
  result.path = absl::StrCat(options_.root, "/", CheckpointDirName(result.sequence));

  proto::CheckpointRequest write;
  write.set_action(proto::CHECKPOINT_WRITE);
  write.set_cut(*cut);
  write.set_since(since);
  write.set_dir(result.path);
  write.set_timeout_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(options_.write_timeout)));
  // The servers give up at write_timeout; the call's deadline is later, so
  // that their error (naming the slowest worker) is the one seen.
  std::vector<absl::StatusOr<proto::CheckpointResponse>> parts =
      CallAll(write, options_.write_timeout + options_.call_timeout);
  if (absl::Status s = FirstError(parts); !s.ok()) {
    return Prefixed(s, absl::StrCat("checkpoint ", result.path, " at cut ", *cut));
  }

  proto::CheckpointManifest manifest;
  manifest.set_sequence(result.sequence);
  manifest.set_base_sequence(base_sequence);
  manifest.set_cut(*cut);
  manifest.set_unix_micros(absl::ToUnixMicros(absl::Now()));
  manifest.set_num_servers(static_cast<uint32_t>(peers_.size()));
  manifest.set_slice_size(options_.slice_size);
  manifest.set_virtual_nodes(options_.virtual_nodes);
  MergeParts(parts, &manifest, &result.bytes);
  result.files = manifest.files_size();
  if (absl::Status s = CommitCheckpoint(result.path, manifest); !s.ok()) return s;
  result.took = absl::Now() - start;
  absl::StatusOr<std::vector<std::string>> pruned = PruneCheckpoints(options_.root, options_.keep);
  if (!pruned.ok()) return Prefixed(pruned.status(), "checkpoint written, pruning old ones");
  result.pruned = *std::move(pruned);
  return result;
}

}  // namespace ps
