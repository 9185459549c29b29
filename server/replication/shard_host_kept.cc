// ShardHost's kept copies (shard_host.h): at a clean stop, a copy whose
// tables are all tiered stays on disk with its state and position
// (KeepCopies); the server id's next process loads it at start and offers it
// when a ring makes it join the shard's chain (LoadKeptCopies, SetRing), so
// that the predecessor sends only the entries after it instead of a
// snapshot of every row.
#include <filesystem>
#include <limits>
#include <map>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/durable_file.h"
#include "common/log.h"
#include "server/core/core_state.h"
#include "server/replication/shard_host.h"
#include "server/store/tier_directory.h"

namespace ps {

namespace {

constexpr absl::string_view kKeptSuffix = ".kept";

// A kept copy's file in the table_dir.
std::string KeptName(int shard, const std::string& scratch) {
  return absl::StrCat("shard", shard, ".", scratch, kKeptSuffix);
}

}  // namespace

absl::Status ShardHost::KeepCopy(int shard, Replica& replica, uint64_t held_by) {
  proto::KeptCopy kept;
  kept.set_shard(static_cast<uint32_t>(shard));
  kept.set_scratch(replica.tier_scratch);
  kept.set_incarnation(held_by);
  absl::Status closed;
  // No update is being applied: the state, the position and the tables'
  // rows are of one moment.
  replica.core->RunOrdered([&] {
    CoreStateIo io(replica.core.get());
    const CoreState state = io.Export(std::numeric_limits<uint64_t>::max(), /*workers=*/true);
    if (state.tables.empty()) {
      closed = absl::FailedPreconditionError("it has no tables");
      return;
    }
    CoreStateToProto(state, kept.mutable_state());
    kept.mutable_state()->set_last(true);
    *kept.mutable_state()->mutable_position() = replica.link->position().ToProto();
    kept.set_max_clock(io.max_clock());
    closed = io.KeepTieredTables();
  });
  if (!closed.ok()) return closed;
  return WriteFileDurably(options_.core.limits.table_dir, KeptName(shard, replica.tier_scratch),
                          kept.SerializeAsString());
}

std::vector<int> ShardHost::KeepCopies() {
  std::vector<int> kept;
  if (!replicated() || options_.core.limits.table_dir.empty()) return kept;
  std::vector<std::pair<int, std::shared_ptr<Slot>>> complete;
  std::map<int, std::shared_ptr<Replica>> offered;
  {
    absl::MutexLock lock(&mu_);
    if (!closed_) return kept;  // forwards may still arrive
    for (const auto& [shard, slot] : slots_) {
      if (slot->complete) complete.emplace_back(shard, slot);
    }
    offered.swap(offered_);  // not taken by a ring yet: kept again as they are
  }
  auto keep = [&](int shard, Replica& replica, uint64_t held_by) {
    const LogPosition at = replica.link->position();
    if (absl::Status s = KeepCopy(shard, replica, held_by); !s.ok()) {
      LogEvent(Who(), absl::StrCat("shard ", shard, ": the copy is not kept on disk (", s.message(),
                                   "); a restarted process is sent a snapshot"));
      return;
    }
    kept.push_back(shard);
    LogEvent(Who(), absl::StrCat("shard ", shard, ": copy at ", at.ToString(), " kept in ",
                                 options_.core.limits.table_dir, " for the next process"));
  };
  for (auto& [shard, slot] : complete) {
    absl::MutexLock slot_lock(&slot->mu);  // no forward is being applied
    keep(shard, *slot->replica, options_.incarnation);
  }
  for (auto& [shard, replica] : offered) keep(shard, *replica, replica->kept_by);
  return kept;
}

std::shared_ptr<ShardHost::Replica> ShardHost::LoadKeptCopy(const std::string& path,
                                                            int* shard_out) {
  const std::string& root = options_.core.limits.table_dir;
  proto::KeptCopy kept;
  {
    absl::StatusOr<std::string> bytes = ReadWholeFile(path);
    // The scratch name is a file name of this server id's (a damaged file
    // must not name a path elsewhere).
    const bool parsed =
        bytes.ok() && kept.ParseFromString(*bytes) && kept.state().tables_size() > 0 &&
        kept.incarnation() != 0 &&
        absl::StartsWith(kept.scratch(), absl::StrCat("id", options_.server_id, "-")) &&
        kept.scratch().find('/') == std::string::npos;
    std::error_code ec;
    std::filesystem::remove(path, ec);  // used once, whatever follows
    if (!parsed) {
      LogEvent(Who(), absl::StrCat(path, " could not be read as a kept copy; ignored"));
      return nullptr;
    }
  }
  const int shard = static_cast<int>(kept.shard());
  *shard_out = shard;
  // This process's name for the directories: the earlier process's are
  // removed at start (RemoveOldTierScratch).
  const std::string scratch = absl::StrCat(TierScratchPrefix(), copies_made_.fetch_add(1));
  for (const proto::TableDef& def : kept.state().tables()) {
    std::error_code ec;
    std::filesystem::rename(TierScratchDir(root, def.name(), shard, kept.scratch()),
                            TierScratchDir(root, def.name(), shard, scratch), ec);
    if (ec) {
      LogEvent(Who(),
               absl::StrCat(path, ": table '", def.name(), "' of the kept copy of shard ", shard,
                            " is missing (", ec.message(), "); the copy is not used"));
      for (const proto::TableDef& d : kept.state().tables()) {
        std::filesystem::remove_all(TierScratchDir(root, d.name(), shard, scratch), ec);
      }
      return nullptr;
    }
  }
  std::shared_ptr<Replica> replica = NewReplica(shard, /*history=*/true, scratch, /*reuse=*/true);
  CoreStateIo io(replica->core.get());
  // The tables open their directories again (refused unless each was
  // closed cleanly with the same definition).
  if (absl::Status s = io.Import(CoreStateFromProto(kept.state())); !s.ok()) {
    LogEvent(Who(), absl::StrCat("the kept copy of shard ", shard, " is not used: ", s.message()));
    replica->Retire(absl::UnavailableError("a kept copy that could not be loaded"));
    return nullptr;  // its tables' directories go with it
  }
  io.RaiseMaxClock(kept.max_clock());
  replica->kept_by = kept.incarnation();
  const LogPosition at = LogPosition::From(kept.state().position());
  replica->link->ResetPosition(at);
  LogEvent(Who(), absl::StrCat("offering a copy of shard ", shard, " at ", at.ToString(),
                               ", kept by an earlier process of this server id"));
  return replica;
}

void ShardHost::LoadKeptCopies() {
  const std::string& root = options_.core.limits.table_dir;
  if (root.empty()) return;
  const std::string mine = absl::StrCat(".id", options_.server_id, "-");
  std::vector<std::string> paths, unfinished;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, "shard") || name.find(mine) == std::string::npos) continue;
    if (absl::EndsWith(name, kKeptSuffix)) paths.push_back(entry.path().string());
    // A stop that did not finish writing it.
    if (absl::EndsWith(name, absl::StrCat(kKeptSuffix, ".tmp"))) {
      unfinished.push_back(entry.path().string());
    }
  }
  for (const std::string& path : unfinished) std::filesystem::remove(path, ec);
  for (const std::string& path : paths) {
    int shard = -1;
    std::shared_ptr<Replica> replica = LoadKeptCopy(path, &shard);
    if (replica == nullptr) continue;
    absl::MutexLock lock(&mu_);
    if (!offered_.emplace(shard, replica).second) {
      LogEvent(Who(), absl::StrCat("a second kept copy of shard ", shard, " is not used"));
      replica->Retire(absl::UnavailableError("a second kept copy"));
    }
  }
}

std::vector<int> ShardHost::KeepableShards() const {
  std::vector<int> shards;
  if (!replicated() || options_.core.limits.table_dir.empty()) return shards;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [shard, slot] : slots_) {
    if (slot->complete && CoreStateIo(slot->replica->core.get()).AllTablesTiered()) {
      shards.push_back(shard);
    }
  }
  return shards;
}

std::map<int, uint64_t> ShardHost::Offers() const {
  absl::ReaderMutexLock lock(&mu_);
  std::map<int, uint64_t> offers;
  for (const auto& [shard, replica] : offered_) offers[shard] = replica->kept_by;
  return offers;
}

std::vector<int> ShardHost::OfferedShards() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<int> shards;
  for (const auto& [shard, replica] : offered_) shards.push_back(shard);
  return shards;
}

}  // namespace ps
