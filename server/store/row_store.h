// RowStore: the disk tier of a tiered sparse table (issue 32): every row of
// the table's slices on this server, on disk in a directory of its own.
// A row is addressed by (slice, key) and is `row_bytes` bytes: the row's
// floats as the table keeps them in memory (values, optimizer state,
// eviction metadata), so a row moves between the tiers without conversion.
//
// Writes come in batches (the table's write-back of dirty rows, a restore,
// a replication snapshot): a batch is applied whole or not at all, together
// with a small `meta` string the table stores with it (the replication
// position its rows are as of), which Open returns after a restart. A batch
// that would take the store past its disk budget, or that the disk refuses,
// fails with nothing of it applied and the store still readable.
//
// Implementations: RocksDbRowStore (server/store/rocksdb_row_store.h) and
// LogRowStore (server/store/log_row_store.h), compared by
// deploy/bench/row_store_bench. Thread-safe: reads may run concurrently
// with each other and with one writer.
#ifndef PS_SERVER_STORE_ROW_STORE_H_
#define PS_SERVER_STORE_ROW_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/store/memory_budget.h"

namespace ps {

struct RowStoreOptions {
  std::string dir;                 // created when missing; must not be shared
  size_t row_bytes = 0;            // > 0
  uint64_t disk_budget_bytes = 0;  // 0: no limit
  // Names the store in errors ("table ctr/emb on server 1").
  std::string name;
  // A budget shared with other stores (a server's --disk_budget_mb; not
  // owned; null: none): the store charges its files' bytes to it, and a
  // batch that would pass it is refused like one past disk_budget_bytes.
  MemoryBudget* shared_disk_budget = nullptr;
};

// What the store holds on disk and in memory.
struct RowStoreStats {
  uint64_t rows = 0;
  uint64_t disk_bytes = 0;    // files in dir (live and not yet reclaimed)
  uint64_t memory_bytes = 0;  // index and buffers this store holds in memory
};

class RowStore {
 public:
  virtual ~RowStore() = default;

  // One atomic batch: rows put (replacing any), keys erased, and meta.
  struct Batch {
    struct Put {
      uint32_t slice;
      uint64_t key;
      const char* row;  // row_bytes, valid until Write returns
    };
    struct Erase {
      uint32_t slice;
      uint64_t key;
    };
    std::vector<Put> puts;
    std::vector<Erase> erases;
    std::vector<uint32_t> dropped_slices;  // every row of these slices erased first
    std::string meta;                      // stored when not empty
    // Whole or not at all on disk either way; with this set, concurrent
    // readers may see the puts take effect some before others (each row
    // whole) until Write returns, so that the store's readers wait less
    // for a large batch. For rows no reader needs together: the tier's
    // demotions (readers look for a row on disk only once the cache lacks
    // it, and either of its values is right until then).
    bool readers_may_see_parts = false;
    // False: Write returns before the batch is on the disk (no fdatasync),
    // readable at once; the next batch written with sync, or a Snapshot,
    // makes it durable, and a crash before may lose it (with any later
    // unsynced ones, never an earlier batch). For what a crash repeats
    // anyway: a restore's or a replication snapshot's rows.
    bool sync = true;
  };
  // Errors: RESOURCE_EXHAUSTED naming the store, its directory and the
  // budget when the batch would pass it; the disk's error (naming the store
  // and directory) when writing fails. Either way nothing of the batch is
  // applied.
  virtual absl::Status Write(const Batch& batch) = 0;

  // Reads the rows of `keys` (all of `slice`) into dst, row_bytes each in
  // order; found[i] says whether keys[i] has a row (dst left as is when
  // not). Reads the keys in one batch (sorted by where they lie).
  virtual absl::Status Read(uint32_t slice, absl::Span<const uint64_t> keys, char* dst,
                            bool* found) const = 0;
  // The same for rows of any slices (refs[i]'s row into dst at i *
  // row_bytes). This one reads each run of refs of one slice with Read.
  struct RowRef {
    uint32_t slice;
    uint64_t key;
  };
  virtual absl::Status ReadMany(absl::Span<const RowRef> refs, char* dst, bool* found) const {
    std::vector<uint64_t> keys;
    for (size_t i = 0, j; i < refs.size(); i = j) {
      keys.clear();
      for (j = i; j < refs.size() && refs[j].slice == refs[i].slice; ++j)
        keys.push_back(refs[j].key);
      if (absl::Status s = Read(refs[i].slice, keys, dst + i * row_bytes_, found + i); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  // Calls fn(key, row) for every row of `slice`, in no particular order,
  // as of the call (writes meanwhile may or may not be seen); stops at
  // fn's first error.
  using RowFn = absl::FunctionRef<absl::Status(uint64_t key, const char* row)>;
  virtual absl::Status ForEach(uint32_t slice, RowFn fn) const = 0;

  // The rows of `slice` (0 when the store cannot tell cheaply).
  virtual uint64_t SliceRows(uint32_t slice) const {
    (void)slice;
    return 0;
  }

  // Where the store's writes stand: ForEachSince(slice, Position()) lists
  // every row of the slice written after this call (and perhaps rows
  // written before). 0 when the store cannot tell.
  virtual uint64_t Position() const { return 0; }
  // Calls fn(key, row) for the rows of `slice` written since `position`
  // (a Position(); 0: all of them) and perhaps others: what an incremental
  // checkpoint reads instead of every row. This one lists every row.
  virtual absl::Status ForEachSince(uint32_t slice, uint64_t position, RowFn fn) const {
    (void)position;
    return ForEach(slice, fn);
  }

  // A copy of the store as of now in `dir` (which must not exist), made of
  // hard links to its files where it can; opening `dir` as a store reads
  // it.
  virtual absl::Status Snapshot(const std::string& dir) const = 0;

  // The meta of the last batch that had one ("" when none).
  virtual std::string meta() const = 0;
  virtual RowStoreStats stats() const = 0;
  size_t row_bytes() const { return row_bytes_; }

 protected:
  explicit RowStore(size_t row_bytes) : row_bytes_(row_bytes) {}

 private:
  const size_t row_bytes_;
};

}  // namespace ps

#endif  // PS_SERVER_STORE_ROW_STORE_H_
