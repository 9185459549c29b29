// RocksDbRowStore: a RowStore in an embedded RocksDB (Debian's
// librocksdb-dev) in the store's directory.
//
// A row's RocksDB key is its slice then its key, both big-endian (12
// bytes), so a slice's rows are one key range (ForEach iterates it, a
// dropped slice is one DeleteRange); the value is the row's bytes. The meta
// is one more key, past every slice. A Batch is one WriteBatch written with
// sync, so it is atomic and durable when Write returns. Rows are not
// compressed (floats do not compress); a 10-bit Bloom filter per key lets a
// read of a key without a row skip the files that lack it. Index and filter
// blocks live in the block cache, whose size is bounded (the store's
// memory is then its memtables and that cache, whatever the number of
// rows).
//
// Disk: the budget is checked before each batch against the files' sizes
// (SST files and the write-ahead log) plus the batch's bytes. When the
// disk itself fails a write, RocksDB stops writing (a background error);
// the store keeps serving reads and tries to resume writing at the next
// batch, returning the error until it succeeds.
#ifndef PS_SERVER_STORE_ROCKSDB_ROW_STORE_H_
#define PS_SERVER_STORE_ROCKSDB_ROW_STORE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/store/row_store.h"

namespace rocksdb {
class DB;
class Cache;
}  // namespace rocksdb

namespace ps {

class RocksDbRowStore final : public RowStore {
 public:
  // Bytes of block cache (index, filter and data blocks) and of each of the
  // two memtables a store keeps.
  static constexpr size_t kBlockCacheBytes = size_t{8} << 20;
  static constexpr size_t kMemtableBytes = size_t{8} << 20;

  // Opens the store in options.dir (created when missing). Errors:
  // INVALID_ARGUMENT (row_bytes 0, no dir), or RocksDB's, naming the store
  // and directory.
  static absl::StatusOr<std::unique_ptr<RocksDbRowStore>> Open(const RowStoreOptions& options);
  ~RocksDbRowStore() override;

  absl::Status Write(const Batch& batch) override;
  absl::Status Read(uint32_t slice, absl::Span<const uint64_t> keys, char* dst,
                    bool* found) const override;
  absl::Status ForEach(uint32_t slice, RowFn fn) const override;
  absl::Status Snapshot(const std::string& dir) const override;
  std::string meta() const override;
  RowStoreStats stats() const override;

 private:
  RocksDbRowStore(const RowStoreOptions& options, std::shared_ptr<rocksdb::Cache> cache,
                  std::unique_ptr<rocksdb::DB> db);
  // An error of this store: `what` and RocksDB's message, naming the store
  // and its directory.
  absl::Status Error(const std::string& what, const std::string& message) const;
  uint64_t DiskBytes() const;

  const RowStoreOptions options_;
  std::shared_ptr<rocksdb::Cache> cache_;
  std::unique_ptr<rocksdb::DB> db_;
};

}  // namespace ps

#endif  // PS_SERVER_STORE_ROCKSDB_ROW_STORE_H_
