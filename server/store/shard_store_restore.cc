// ShardStore::AdoptRowSnapshot: a restore onto the layout a checkpoint was
// taken under takes a tiered table's store snapshot as its files.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/optimizer/optimizer.h"
#include "common/table_layout.h"
#include "server/store/shard_store.h"
#include "server/store/tier_directory.h"

namespace ps {

absl::StatusOr<bool> ShardStore::AdoptRowSnapshot(const proto::TableDef& def,
                                                  const std::string& checkpoint_dir,
                                                  const proto::RowStoreSnapshot& snapshot) {
  if (def.kind() != proto::TABLE_SPARSE || def.storage() != proto::STORAGE_TIERED ||
      limits_.table_dir.empty() || !limits_.tier_scratch.empty() ||
      snapshot.table() != def.name()) {
    return false;
  }
  {
    absl::ReaderMutexLock lock(&tables_mu_);
    if (tables_.contains(def.name())) return false;
  }
  // Exactly the buckets this server owns, in rows of this table's layout.
  std::vector<uint64_t> owned;
  for (uint64_t s = 0; s < LayoutOf(def).num_buckets; ++s) {
    if (placement_.OwnerOfSlice(def.name(), s) == server_index_) owned.push_back(s);
  }
  std::vector<uint64_t> theirs(snapshot.buckets().begin(), snapshot.buckets().end());
  std::sort(theirs.begin(), theirs.end());
  if (owned != theirs) return false;
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(def);
  if (!optimizer.ok()) return optimizer.status();
  const size_t row_bytes = SparseTable::StoreRowBytes(def, **optimizer);
  if (row_bytes != snapshot.row_bytes()) return false;
  std::vector<std::string> files;
  for (const proto::CheckpointFile& file : snapshot.files()) files.push_back(file.name());
  const TierPlace place{limits_.table_dir, "", server_index_, nullptr};
  return AdoptTierSnapshot(place, def, row_bytes, absl::StrCat(checkpoint_dir, "/", snapshot.dir()),
                           files);
}

}  // namespace ps
