#include "server/checkpoint/row_snapshots.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/store/log_row_store.h"

namespace ps {
namespace {

// A name of one directory entry: not empty, no '/', not "." or "..".
bool PlainName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

absl::Status Damaged(const std::string& path, const proto::RowStoreSnapshot& snapshot,
                     absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("row store snapshot ", path, " of table '", snapshot.table(), "': ", what));
}

// What the manifest says of the snapshot at `path` (its directory's name,
// its row layout, its files and their sizes, and no other file there) is
// so; the store's options to read it.
absl::StatusOr<RowStoreOptions> CheckListed(const std::string& path,
                                            const proto::RowStoreSnapshot& snapshot) {
  const auto damaged = [&](absl::string_view what) { return Damaged(path, snapshot, what); };
  if (!PlainName(snapshot.dir())) return damaged("its directory is not a plain name");
  if (snapshot.width() == 0 || snapshot.width() > snapshot.floats_per_row() ||
      snapshot.row_bytes() != (uint64_t{snapshot.floats_per_row()} + 1) * sizeof(float)) {
    return damaged(absl::StrCat("rows of ", snapshot.row_bytes(), " bytes do not hold ",
                                snapshot.floats_per_row(), " floats of width ", snapshot.width(),
                                " and a change tag"));
  }
  std::set<std::string> listed;
  for (const proto::CheckpointFile& file : snapshot.files()) {
    if (!PlainName(file.name())) return damaged(absl::StrCat("file '", file.name(), "'"));
    std::error_code ec;
    const uint64_t bytes = std::filesystem::file_size(absl::StrCat(path, "/", file.name()), ec);
    if (ec) return damaged(absl::StrCat(file.name(), ": ", ec.message()));
    if (bytes != file.bytes()) {
      return damaged(absl::StrCat(file.name(), " has ", bytes, " bytes, expected ", file.bytes(),
                                  " (truncated or extended)"));
    }
    listed.insert(file.name());
  }
  std::error_code ec;
  for (std::filesystem::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (listed.count(name) == 0) return damaged(absl::StrCat(name, " is not in the manifest"));
  }
  if (ec) return damaged(absl::StrCat("listing it: ", ec.message()));
  RowStoreOptions options;
  options.dir = path;
  options.row_bytes = snapshot.row_bytes();
  options.name = absl::StrCat("snapshot of table ", snapshot.table());
  return options;
}

// The store's error as DATA_LOSS naming the snapshot (damage either way).
absl::Status AsDamage(const std::string& path, const proto::RowStoreSnapshot& snapshot,
                      const absl::Status& status) {
  if (status.ok() || status.code() == absl::StatusCode::kDataLoss) return status;
  return Damaged(path, snapshot, status.message());
}

}  // namespace

absl::Status DescribeRowSnapshot(const std::string& dir, proto::RowStoreSnapshot* snapshot) {
  const std::string path = snapshot->dir();
  const std::string prefix = dir + "/";
  if (!absl::StartsWith(path, prefix) || !PlainName(path.substr(prefix.size()))) {
    return absl::InternalError(
        absl::StrCat("row store snapshot ", path, " is not a directory directly in ", dir));
  }
  std::vector<std::pair<std::string, uint64_t>> files;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    const uint64_t bytes = it->file_size(ec);
    if (ec) break;
    files.emplace_back(it->path().filename().string(), bytes);
  }
  if (ec) {
    return absl::InternalError(
        absl::StrCat("listing the row store snapshot ", path, ": ", ec.message()));
  }
  std::sort(files.begin(), files.end());
  snapshot->set_dir(path.substr(prefix.size()));
  snapshot->clear_files();
  for (const auto& [name, bytes] : files) {
    proto::CheckpointFile* file = snapshot->add_files();
    file->set_name(name);
    file->set_bytes(bytes);
  }
  return absl::OkStatus();
}

absl::Status CheckRowSnapshot(const std::string& dir, const proto::RowStoreSnapshot& snapshot) {
  const std::string path = absl::StrCat(dir, "/", snapshot.dir());
  absl::StatusOr<RowStoreOptions> options = CheckListed(path, snapshot);
  if (!options.ok()) return options.status();
  return AsDamage(path, snapshot, LogRowStore::Check(*options));
}

absl::StatusOr<std::unique_ptr<RowStore>> OpenRowSnapshot(const std::string& dir,
                                                          const proto::RowStoreSnapshot& snapshot) {
  const std::string path = absl::StrCat(dir, "/", snapshot.dir());
  absl::StatusOr<RowStoreOptions> options = CheckListed(path, snapshot);
  if (!options.ok()) return options.status();
  LogRowStoreOptions log;
  log.read_only = true;
  absl::StatusOr<std::unique_ptr<LogRowStore>> store = LogRowStore::Open(*options, log);
  if (!store.ok()) return AsDamage(path, snapshot, store.status());
  return std::unique_ptr<RowStore>(*std::move(store));
}

}  // namespace ps
