// LogRowStore: a RowStore (server/store/row_store.h) kept as a log of
// fixed-size records in append-only segment files, with the place of every
// row in memory; Open replays the log to rebuild it.
//
// On disk (server/store/log_format.h): files seg-%08u.log in `dir`, in log
// order, each at most segment_bytes of units of 20 + row_bytes bytes: a
// header (row_bytes), then whole-unit records, each with a CRC-32C: a row
// (slice, key, row), a block of erased keys, a dropped slice, and a commit
// that ends a batch with the store's meta and the count and checksum of
// the batch's records in its segment. A batch that fills a segment syncs
// it and goes on in a new one (LogAppender); Write returns after the
// batch's fdatasync. Open cuts off a trailing batch without a valid commit
// (a torn write); damage before the last batch is DATA_LOSS. Open never
// appends to a file it found: writes start a new segment, so files shared
// with a snapshot (hard links) are never changed.
//
// Erases: a tombstone names the seq of the segment its key's row was in
// (its "killed seq") and, replayed, erases the key only where the key's
// row lies in a segment up to that seq; a dropped slice likewise (and is
// written in a segment after every row it drops). Compaction copies a
// tombstone on while a segment it may shadow exists, and drops it once
// none does or the key has a newer row.
//
// Space (LogSegments::ChooseVictims): before each batch the writer
// compacts sealed segments (not the one being appended to) that are
// mostly garbage: under half live, or under 0.9 live while the files pass
// 1.25x the live bytes, fewest live bytes first, copying at most 4x the
// batch's bytes: their live rows and needed tombstones go to the head as a
// batch of their own, then the segments are deleted. Measured under random
// overwrites (log_row_store_test, 10^4 rows of 136 bytes overwritten 10
// times over): 194 bytes on disk per live row, 1.42x row_bytes (1.24x the
// 156-byte record).
//
// Memory (server/store/log_row_index.h): a robin-hood table of 12-byte
// slots (key, place) per slice, at most 0.9 full, grown by 1/8: measured
// 14.1 bytes per row on average and 15.0 at worst over 10^5..10^6 rows in
// 8 slices (log_row_store_test MemorySweep), plus about 100 bytes per
// segment and 50 per slice.
//
// Thread-safety: Read, ForEach, meta and stats run concurrently with each
// other and with one Write or Snapshot (those two are serialised). Reads
// find rows under a shared lock and read the files without it: segment
// files are only appended to and deleted, and an open file outlives its
// deletion.
#ifndef PS_SERVER_STORE_LOG_ROW_STORE_H_
#define PS_SERVER_STORE_LOG_ROW_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "server/store/disk_account.h"
#include "server/store/log_appender.h"
#include "server/store/log_row_index.h"
#include "server/store/log_segments.h"
#include "server/store/row_store.h"

namespace ps {

// Tuning of the log; the defaults suit production, tests shrink segments.
struct LogRowStoreOptions {
  // Holds at least 4 records. Compaction and replay read a segment a MiB
  // at a time, and appends are written a MiB at a time: the size sets how
  // many files there are and how much one compaction copies, not memory.
  uint64_t segment_bytes = uint64_t{16} << 20;
  // Compaction keeps the files under about this many times the live bytes
  // (1.15: a tiered table's rows of width 16 with AdaGrad take at most 1.5x
  // their values and state, with records' headers and a row's bookkeeping).
  double target_disk_ratio = 1.15;
  // Every read asks the kernel for its rows' pages first (tests; else only
  // reads after one that found its rows on the disk: LogReadAdvice).
  bool advise_every_read = false;
  // Opens an existing directory without changing it (no LOCK file, a torn
  // last batch is DATA_LOSS, Write fails): a snapshot in a checkpoint.
  bool read_only = false;
};

class LogRowStore final : public RowStore {
 public:
  // Bytes of a record's header: a record of a row is this plus row_bytes.
  static constexpr size_t kHeaderBytes = 20;

  // Opens the store in options.dir, creating the directory when missing,
  // and replays its segments: the rows and meta of every complete batch.
  // Errors: INVALID_ARGUMENT for bad options or a directory written with
  // another row_bytes; FAILED_PRECONDITION when another store has the
  // directory open; DATA_LOSS naming the file and offset of a damaged
  // record before the last batch; the OS's error naming the path.
  static absl::StatusOr<std::unique_ptr<LogRowStore>> Open(const RowStoreOptions& options);
  static absl::StatusOr<std::unique_ptr<LogRowStore>> Open(const RowStoreOptions& options,
                                                           const LogRowStoreOptions& log);
  // Reads the log in options.dir as Open replays it (every record's
  // CRC-32C, every batch's count and checksum) without opening a store:
  // nothing written, no index built (a checkpoint's verification). Errors
  // as Open's, and DATA_LOSS for a torn last batch.
  static absl::Status Check(const RowStoreOptions& options,
                            const LogRowStoreOptions& log = LogRowStoreOptions());
  ~LogRowStore() override;
  LogRowStore(const LogRowStore&) = delete;
  LogRowStore& operator=(const LogRowStore&) = delete;

  // In a batch: dropped slices first, then the puts in order, then the
  // erases. Errors as RowStore's, plus INVALID_ARGUMENT (a null row, a meta
  // that does not fit a segment), FAILED_PRECONDITION after a failed write
  // could not be undone (reopen the store), DATA_LOSS when compaction finds
  // a damaged record.
  absl::Status Write(const Batch& batch) override;
  // DATA_LOSS naming the file and offset when a record fails its checksum
  // or holds another key.
  absl::Status Read(uint32_t slice, absl::Span<const uint64_t> keys, char* dst,
                    bool* found) const override;
  // The same over any slices' rows: one lookup under the lock, one pass
  // over the files.
  absl::Status ReadMany(absl::Span<const RowRef> refs, char* dst, bool* found) const override;
  // Copies the slice's (key, place) pairs (16 bytes a row) under the lock,
  // then reads the rows in file order without it, so fn may call the store.
  absl::Status ForEach(uint32_t slice, RowFn fn) const override;
  // The segment being written's number and its length in units (<< 32 |):
  // every row written after the call lies past them. Nothing is sealed.
  uint64_t Position() const override;
  uint64_t SliceRows(uint32_t slice) const override;
  // The rows whose records lie past `position` in the log: those written
  // since, and rows compaction moved since.
  absl::Status ForEachSince(uint32_t slice, uint64_t position, RowFn fn) const override;
  // Seals the segment being written (the next batch starts a new one) and
  // hard-links every segment into `dir` (copies where links fail with
  // EXDEV). ALREADY_EXISTS when dir exists.
  absl::Status Snapshot(const std::string& dir) const override;
  std::string meta() const override;
  RowStoreStats stats() const override;

 private:
  struct Op;       // one change to the index, in log order
  class Registry;  // segs_, as LogAppender sees it

  LogRowStore(const RowStoreOptions& options, const LogRowStoreOptions& log);
  // INVALID_ARGUMENT for options Open and Check refuse.
  static absl::Status CheckOptions(const RowStoreOptions& options, const LogRowStoreOptions& log);

  // Open's work: lock the directory, replay the log, cut a torn batch.
  absl::Status Init();
  absl::Status Replay() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Applies ops (the records of a committed batch, in log order) to the
  // index and the segments' counts.
  void ApplyLocked(absl::Span<const Op> ops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Where the next batch starts.
  LogAppender::Head HeadLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Write's records: the dropped slices, puts, erases and the commit.
  absl::Status AppendBatchLocked(const Batch& batch, const std::string& meta, LogAppender* app,
                                 std::vector<Op>* ops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Appends erase entries (row_log::kEntryBytes each) in blocks, an op each.
  absl::Status AppendErases(LogAppender* app, const std::string& entries,
                            std::vector<Op>* ops) const;
  // After app committed: applies ops and the new sizes, head and meta;
  // `chunk` ops a hold of mu_ (readers see the ops of a chunk at once).
  void FinishLocked(const LogAppender& app, absl::Span<const Op> ops, const std::string& meta,
                    size_t chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Brings what the store charges the shared disk budget to its files'
  // bytes now (account_.Sync).
  void SyncSharedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Takes app's batch back; a failure to do so stops writes (broken_).
  void RollbackLocked(LogAppender* app) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  // Compacts `victims` (LogSegments::ChooseVictims) as a batch of their
  // live rows and needed tombstones, then deletes them.
  absl::Status CompactLocked(const std::vector<uint32_t>& victims)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Appends the live rows of segment `id` (ops for them) and adds the
  // tombstones and dropped slices it holds that are still needed to
  // *entries and *drops.
  absl::Status CopyLiveLocked(uint32_t id, LogAppender* app, std::vector<Op>* ops,
                              std::string* entries,
                              std::vector<std::pair<uint32_t, uint32_t>>* drops)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  uint64_t UnitsFor(uint64_t bytes) const { return (bytes + unit_ - 1) / unit_; }
  // "LogRowStore <name> (<dir>)", to start error messages with.
  std::string where() const;
  absl::Status IoError(int err, const std::string& what, const std::string& path) const;

  const RowStoreOptions options_;
  const LogRowStoreOptions log_;
  const size_t unit_;  // bytes of a unit: kHeaderBytes + row_bytes
  const uint32_t units_per_segment_;
  const size_t block_entries_;  // erased keys in one record, at most
  LogAppender::Log append_;     // set by Init
  int dir_fd_ = -1;
  int lock_fd_ = -1;

  // The writer's state. Snapshot (const) seals the head, hence mutable.
  mutable absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable uint32_t head_ ABSL_GUARDED_BY(write_mu_) = LogSegments::kNoSegment;
  uint32_t next_seq_ ABSL_GUARDED_BY(write_mu_) = 1;
  std::string broken_ ABSL_GUARDED_BY(write_mu_);  // why writes are refused
  // The head holds batches written without sync (a full segment is synced
  // before the next starts: only the head can).
  mutable bool head_unsynced_ ABSL_GUARDED_BY(write_mu_) = false;
  DiskAccount account_ ABSL_GUARDED_BY(write_mu_);  // options_.shared_disk_budget's

  // What readers see; changed only by the writer (holding write_mu_ too).
  mutable absl::Mutex mu_;
  LogSliceIndexes index_ ABSL_GUARDED_BY(mu_);
  LogSegments segs_ ABSL_GUARDED_BY(mu_);
  std::string meta_ ABSL_GUARDED_BY(mu_);
  // Whether ReadMany asks for its rows' pages first.
  mutable LogReadAdvice advice_;
};

}  // namespace ps

#endif  // PS_SERVER_STORE_LOG_ROW_STORE_H_
