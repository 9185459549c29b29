// Where a tiered table's rows live on a server's disk (ps_server
// --table_dir), and whether an earlier run's rows there are served again.
//
// A static server's table: <table_dir>/<name>.server<i> ('/' in the name
// as '_'). Its store's meta says whether the table was closed cleanly
// (ClosedTierMeta, written by the table's close after its cache) or is open
// (written when it is opened), with its definition: an earlier run's
// directory is served again when it was closed cleanly and the definition
// is the same but for cache_mb; one left open by a crash (its rows are of
// different ages) or of another definition is refused, saying why.
//
// A replicated shard's copy (place.scratch not empty): a scratch directory
// <name>.shard<i>.<scratch>, emptied when opened, which the caller removes
// with the table (the chain holds the rows). Unless place.reuse_scratch: a
// copy kept at a clean stop (ShardHost::KeepCopies), whose directory is
// served again as a static server's is (closed cleanly, same definition),
// or created when there is none.
#ifndef PS_SERVER_STORE_TIER_DIRECTORY_H_
#define PS_SERVER_STORE_TIER_DIRECTORY_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/ps.pb.h"
#include "server/store/memory_budget.h"
#include "server/store/row_store.h"

namespace ps {

struct TierPlace {
  std::string table_dir;       // "": tiered tables are refused
  std::string scratch;         // StoreLimits::tier_scratch
  bool reuse_scratch = false;  // StoreLimits::tier_reuse
  int server_index = 0;
  MemoryBudget* disk_budget = nullptr;  // the files' budget (not owned)
};

struct OpenedTier {
  std::unique_ptr<RowStore> store;
  std::string scratch_dir;  // "": not a scratch directory
};

// The store of tiered table `def` (rows of `row_bytes`) at `place`, marked
// open. FAILED_PRECONDITION without a table_dir, or for an earlier run's
// directory that was not closed cleanly or holds another definition; the
// store's errors.
absl::StatusOr<OpenedTier> OpenTierStore(const TierPlace& place, const proto::TableDef& def,
                                         size_t row_bytes);

// The scratch directory of tiered table `table` in a copy of `shard`:
// <table_dir>/<table>.shard<shard>.<scratch> ('/' in the name as '_').
std::string TierScratchDir(const std::string& table_dir, const std::string& table, int shard,
                           const std::string& scratch);

// The meta a table's clean close writes last: its directory may be served
// again.
std::string ClosedTierMeta(const proto::TableDef& def);

}  // namespace ps

#endif  // PS_SERVER_STORE_TIER_DIRECTORY_H_
