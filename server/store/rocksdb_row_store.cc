#include "server/store/rocksdb_row_store.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/options.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/write_batch.h"

namespace ps {
namespace {

constexpr size_t kKeyBytes = 12;
// The meta's key: past every slice's rows.
constexpr char kMetaKey[] = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff";

void PutBigEndian(uint64_t v, int bytes, char* out) {
  for (int i = bytes - 1; i >= 0; --i) {
    out[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
}

uint64_t GetBigEndian(const char* in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}

struct RowKey {
  char bytes[kKeyBytes];
  RowKey(uint32_t slice, uint64_t key) {
    PutBigEndian(slice, 4, bytes);
    PutBigEndian(key, 8, bytes + 4);
  }
  rocksdb::Slice slice() const { return rocksdb::Slice(bytes, kKeyBytes); }
};

}  // namespace

absl::StatusOr<std::unique_ptr<RocksDbRowStore>> RocksDbRowStore::Open(
    const RowStoreOptions& options) {
  if (options.row_bytes == 0 || options.dir.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("row store ", options.name, ": needs a directory and row_bytes > 0 (dir '",
                     options.dir, "', row_bytes ", options.row_bytes, ")"));
  }
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(absl::StrCat(
        "row store ", options.name, ": cannot create directory ", options.dir, ": ", ec.message()));
  }
  std::shared_ptr<rocksdb::Cache> cache = rocksdb::NewLRUCache(kBlockCacheBytes);
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.cache_index_and_filter_blocks = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  table.block_size = 4 * 1024;  // a row read reads one block: 4 KiB, not 16
  rocksdb::Options db_options;
  db_options.create_if_missing = true;
  db_options.compression = rocksdb::kNoCompression;
  db_options.bottommost_compression = rocksdb::kNoCompression;
  db_options.write_buffer_size = kMemtableBytes;
  db_options.max_write_buffer_number = 2;
  db_options.max_background_jobs = 2;
  db_options.max_open_files = 256;
  db_options.keep_log_file_num = 2;
  db_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, options.dir, &raw);
  if (!s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "row store ", options.name, ": cannot open RocksDB in ", options.dir, ": ", s.ToString()));
  }
  return std::unique_ptr<RocksDbRowStore>(
      new RocksDbRowStore(options, std::move(cache), std::unique_ptr<rocksdb::DB>(raw)));
}

RocksDbRowStore::RocksDbRowStore(const RowStoreOptions& options,
                                 std::shared_ptr<rocksdb::Cache> cache,
                                 std::unique_ptr<rocksdb::DB> db)
    : RowStore(options.row_bytes),
      options_(options),
      cache_(std::move(cache)),
      db_(std::move(db)) {}

RocksDbRowStore::~RocksDbRowStore() {
  if (db_ != nullptr) (void)db_->Close();
}

absl::Status RocksDbRowStore::Error(const std::string& what, const std::string& message) const {
  return absl::UnavailableError(
      absl::StrCat("row store ", options_.name, " in ", options_.dir, ": ", what, ": ", message));
}

uint64_t RocksDbRowStore::DiskBytes() const {
  uint64_t bytes = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(options_.dir, ec)) {
    std::error_code size_ec;
    const uint64_t size = entry.is_regular_file(size_ec) ? entry.file_size(size_ec) : 0;
    if (!size_ec) bytes += size;
  }
  return bytes;
}

absl::Status RocksDbRowStore::Write(const Batch& batch) {
  rocksdb::WriteBatch wb;
  uint64_t bytes = 0;
  for (uint32_t slice : batch.dropped_slices) {
    wb.DeleteRange(RowKey(slice, 0).slice(), RowKey(slice + 1, 0).slice());
  }
  for (const Batch::Erase& e : batch.erases) {
    wb.Delete(RowKey(e.slice, e.key).slice());
    bytes += kKeyBytes;
  }
  for (const Batch::Put& p : batch.puts) {
    wb.Put(RowKey(p.slice, p.key).slice(), rocksdb::Slice(p.row, row_bytes()));
    bytes += kKeyBytes + row_bytes();
  }
  if (!batch.meta.empty()) {
    wb.Put(rocksdb::Slice(kMetaKey, kKeyBytes + 1), batch.meta);
    bytes += batch.meta.size();
  }
  if (options_.disk_budget_bytes > 0) {
    // The batch lands in the log and then in a table file: twice its bytes
    // until the log is dropped.
    const uint64_t used = DiskBytes();
    if (used + 2 * bytes > options_.disk_budget_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "row store ", options_.name, " in ", options_.dir, ": a batch of ", batch.puts.size(),
          " rows (", 2 * bytes, " bytes with its log) does not fit the disk ", "budget of ",
          options_.disk_budget_bytes, " bytes (", used, " used)"));
    }
  }
  rocksdb::WriteOptions write_options;
  write_options.sync = batch.sync;
  rocksdb::Status s = db_->Write(write_options, &wb);
  if (!s.ok()) {
    // A failed write stops RocksDB's writes (a background error) until
    // resumed: try now, so that the next batch can go through once the
    // disk has room again; this batch stays failed either way.
    const rocksdb::Status resumed = db_->Resume();
    return Error(absl::StrCat("writing a batch of ", batch.puts.size(), " rows failed (nothing ",
                              "of it applied", resumed.ok() ? "" : "; writes stay stopped", ")"),
                 s.ToString());
  }
  return absl::OkStatus();
}

absl::Status RocksDbRowStore::Read(uint32_t slice, absl::Span<const uint64_t> keys, char* dst,
                                   bool* found) const {
  if (keys.empty()) return absl::OkStatus();
  // Sorted keys let MultiGet walk each file once.
  std::vector<uint32_t> order(keys.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
  std::vector<RowKey> row_keys;
  row_keys.reserve(keys.size());
  std::vector<rocksdb::Slice> slices;
  slices.reserve(keys.size());
  for (uint32_t i : order) {
    row_keys.emplace_back(slice, keys[i]);
    slices.push_back(row_keys.back().slice());
  }
  std::vector<rocksdb::PinnableSlice> values(keys.size());
  std::vector<rocksdb::Status> statuses(keys.size());
  db_->MultiGet(rocksdb::ReadOptions(), db_->DefaultColumnFamily(), keys.size(), slices.data(),
                values.data(), statuses.data(), /*sorted_input=*/true);
  for (size_t j = 0; j < order.size(); ++j) {
    const uint32_t i = order[j];
    if (statuses[j].IsNotFound()) {
      found[i] = false;
      continue;
    }
    if (!statuses[j].ok()) return Error("reading rows", statuses[j].ToString());
    if (values[j].size() != row_bytes()) {
      return absl::DataLossError(absl::StrCat("row store ", options_.name, " in ", options_.dir,
                                              ": key ", keys[i], " of slice ", slice, " has ",
                                              values[j].size(), " bytes, not ", row_bytes()));
    }
    std::memcpy(dst + i * row_bytes(), values[j].data(), row_bytes());
    found[i] = true;
  }
  return absl::OkStatus();
}

absl::Status RocksDbRowStore::ForEach(uint32_t slice, RowFn fn) const {
  const RowKey begin(slice, 0), end(slice + 1, 0);
  const rocksdb::Slice upper = end.slice();
  rocksdb::ReadOptions read_options;
  read_options.iterate_upper_bound = &upper;
  read_options.fill_cache = false;  // a scan must not push the hot blocks out
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read_options));
  for (it->Seek(begin.slice()); it->Valid(); it->Next()) {
    const rocksdb::Slice k = it->key();
    const rocksdb::Slice v = it->value();
    if (k.size() != kKeyBytes || v.size() != row_bytes()) {
      return absl::DataLossError(absl::StrCat("row store ", options_.name, " in ", options_.dir,
                                              ": a record of slice ", slice, " has a ", k.size(),
                                              "-byte key and ", v.size(), " bytes of row"));
    }
    if (absl::Status s = fn(GetBigEndian(k.data() + 4, 8), v.data()); !s.ok()) return s;
  }
  if (!it->status().ok()) return Error("scanning a slice", it->status().ToString());
  return absl::OkStatus();
}

absl::Status RocksDbRowStore::Snapshot(const std::string& dir) const {
  rocksdb::Checkpoint* raw = nullptr;
  rocksdb::Status s = rocksdb::Checkpoint::Create(db_.get(), &raw);
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  if (s.ok()) s = checkpoint->CreateCheckpoint(dir);
  if (!s.ok()) return Error(absl::StrCat("snapshot into ", dir), s.ToString());
  return absl::OkStatus();
}

std::string RocksDbRowStore::meta() const {
  std::string value;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), rocksdb::Slice(kMetaKey, kKeyBytes + 1), &value);
  return s.ok() ? value : std::string();
}

RowStoreStats RocksDbRowStore::stats() const {
  RowStoreStats stats;
  uint64_t v = 0;
  if (db_->GetIntProperty("rocksdb.estimate-num-keys", &v)) stats.rows = v;
  stats.disk_bytes = DiskBytes();
  uint64_t memtables = 0;
  db_->GetIntProperty("rocksdb.cur-size-all-mem-tables", &memtables);
  stats.memory_bytes = memtables + cache_->GetUsage();
  return stats;
}

}  // namespace ps
