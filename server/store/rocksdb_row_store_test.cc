// RocksDbRowStore against the RowStore conformance suite.
#include "server/store/rocksdb_row_store.h"

#include "server/store/row_store_conformance.h"

namespace ps {
namespace {

absl::StatusOr<std::unique_ptr<RowStore>> OpenRocksDb(const RowStoreOptions& options) {
  absl::StatusOr<std::unique_ptr<RocksDbRowStore>> store = RocksDbRowStore::Open(options);
  if (!store.ok()) return store.status();
  return std::unique_ptr<RowStore>(*std::move(store));
}

INSTANTIATE_TEST_SUITE_P(RocksDb, RowStoreConformanceTest, ::testing::Values(&OpenRocksDb));

}  // namespace
}  // namespace ps
