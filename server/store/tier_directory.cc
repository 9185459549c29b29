#include "server/store/tier_directory.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/table_def.h"
#include "server/store/log_row_store.h"

namespace ps {

namespace {

// The meta of a tiered table's store (not a scratch one): whether it was
// closed cleanly, then its definition.
constexpr absl::string_view kTierOpen = "open\n", kTierClosed = "closed\n";

// The definition with what may change from run to run cleared.
proto::TableDef TierIdentity(proto::TableDef def) {
  def.clear_cache_mb();
  return def;
}

// A table's name as the start of a directory's ('/' as '_').
std::string DirName(std::string table) {
  std::replace(table.begin(), table.end(), '/', '_');
  return table;
}

}  // namespace

std::string TierScratchDir(const std::string& table_dir, const std::string& table, int shard,
                           const std::string& scratch) {
  return absl::StrCat(table_dir, "/", DirName(table), ".shard", shard, ".", scratch);
}

std::string ClosedTierMeta(const proto::TableDef& def) {
  return absl::StrCat(kTierClosed, def.SerializeAsString());
}

absl::StatusOr<OpenedTier> OpenTierStore(const TierPlace& place, const proto::TableDef& def,
                                         size_t row_bytes) {
  const std::string where =
      absl::StrCat("table '", def.name(), "' is tiered (storage STORAGE_TIERED)");
  if (place.table_dir.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": start ps_server with --table_dir, the directory its rows go under"));
  }
  RowStoreOptions options;
  options.row_bytes = row_bytes;
  options.shared_disk_budget = place.disk_budget;
  std::error_code ec;
  std::string scratch_dir;
  if (!place.scratch.empty()) {
    options.dir = TierScratchDir(place.table_dir, def.name(), place.server_index, place.scratch);
    options.name = absl::StrCat("table ", def.name(), " of shard ", place.server_index);
    scratch_dir = options.dir;
    if (!place.reuse_scratch) std::filesystem::remove_all(options.dir, ec);
  } else {
    options.dir =
        absl::StrCat(place.table_dir, "/", DirName(def.name()), ".server", place.server_index);
    options.name = absl::StrCat("table ", def.name(), " on server ", place.server_index);
  }
  const bool earlier =
      std::filesystem::exists(options.dir, ec) && !std::filesystem::is_empty(options.dir, ec);
  absl::StatusOr<std::unique_ptr<LogRowStore>> store = LogRowStore::Open(options);
  if (!store.ok()) return store.status();
  if (earlier) {
    // An earlier run's rows are served again when it closed the table
    // cleanly (its cache written) and the table is the same.
    const std::string meta = (*store)->meta();
    proto::TableDef was;
    const bool closed = absl::StartsWith(meta, kTierClosed);
    if (!closed) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, ": ", options.dir,
          " holds rows of an earlier run that did not stop cleanly (its cache was not written "
          "to disk, so the rows there are of different ages); restore a checkpoint into an empty "
          "directory (remove this one), or give another --table_dir"));
    }
    if (!was.ParseFromString(meta.substr(kTierClosed.size())) ||
        !SameTableDef(TierIdentity(was), TierIdentity(def))) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, ": ", options.dir, " holds the rows of another definition of the table (",
          TableDefSummary(was), "; now ", TableDefSummary(def),
          "); remove the directory, or give another --table_dir"));
    }
    LogEvent(options.name, absl::StrCat("serving ", (*store)->stats().rows, " rows from ",
                                        options.dir, ", written by an earlier run"));
  }
  // Marked open until closed cleanly.
  RowStore::Batch mark;
  mark.meta = absl::StrCat(kTierOpen, def.SerializeAsString());
  if (absl::Status s = (*store)->Write(mark); !s.ok()) return s;
  return OpenedTier{*std::move(store), scratch_dir};
}

}  // namespace ps
