// The segment files of a LogRowStore (server/store/log_row_store.h): the
// table of them by id, with what each holds, the choice of which to
// compact, and the reading of rows from them. Private to the log_row_store
// library.
//
// A place in the log (what the index keeps for a row) is
// id * units_per_segment + the row's unit in the segment, so ids are kept
// small (a deleted segment's id is reused) and below max_segments.
#ifndef PS_SERVER_STORE_LOG_SEGMENTS_H_
#define PS_SERVER_STORE_LOG_SEGMENTS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/prefetch.h"
#include "server/store/log_format.h"

namespace ps {

// An open segment file, closed with the last reference: readers hold one
// while they read, so a segment compacted and deleted meanwhile stays
// readable. Mapped read-only over its first map_bytes (the most a segment
// holds) when it can be, for random reads: reads of a page at most copy
// from the mapping, with no system call (server/store/mapped_copy.h);
// longer ones (runs of rows, compaction's chunks) are preads, which the
// kernel reads ahead. Immutable; thread-safe.
struct LogSegmentFile {
  LogSegmentFile(int fd, uint32_t seq, std::string path, size_t map_bytes);
  ~LogSegmentFile();
  LogSegmentFile(const LogSegmentFile&) = delete;
  LogSegmentFile& operator=(const LogSegmentFile&) = delete;
  // Up to n bytes at off into p (*got: fewer at the end of the file); 0 or
  // an errno (EIO for a page the mapping could not read).
  int Read(char* p, size_t n, uint64_t off, size_t* got) const;
  // Hints that the bytes at off will be read soon (no fault, no call).
  void Prefetch(uint64_t off) const {
    // Unconditional (common/prefetch.h): past the mapping, it loads nothing.
    PrefetchAt(map, off);
  }
  const int fd;
  const uint32_t seq;  // the file's number: the log's order
  const std::string path;
  const char* const map;   // null: not mapped
  const size_t map_bytes;  // 0: not mapped
};

// When to compact (LogSegments::ChooseVictims).
struct LogCompaction {
  double target_disk_ratio = 1.25;  // files / live bytes, compacted down to
  uint64_t most_copied = 0;         // bytes of live records copied per batch
  uint64_t disk_budget = 0;         // 0: none
};

// A row to read: its key, place, and where the caller wants it.
struct LogPlace {
  uint64_t key;
  uint32_t place;
  uint32_t index;
  uint32_t slice;
};

// Not thread-safe: the store's lock guards it.
class LogSegments {
 public:
  static constexpr uint32_t kNoSegment = ~uint32_t{0};

  struct Segment {
    std::shared_ptr<const LogSegmentFile> file;  // null: a free id
    uint32_t seq = 0;
    uint64_t units = 0;        // committed units in the file
    uint64_t live_rows = 0;    // rows the index points at
    uint64_t erase_bytes = 0;  // tombstones and dropped slices
    uint32_t max_killed = 0;   // the largest killed seq among them
  };

  LogSegments(size_t unit, uint32_t units_per_segment);

  uint32_t IdOf(uint32_t place) const { return place / units_per_segment_; }
  uint32_t Place(uint32_t id, uint64_t unit) const {
    return static_cast<uint32_t>(id * units_per_segment_ + unit);
  }
  uint64_t OffsetOf(uint32_t place) const { return place % units_per_segment_ * uint64_t{unit_}; }
  size_t ids() const { return segs_.size(); }
  Segment& operator[](uint32_t id) { return segs_[id]; }
  const Segment& operator[](uint32_t id) const { return segs_[id]; }

  // Adds a segment; its id, or kNoSegment when every id is taken.
  uint32_t Add(std::shared_ptr<const LogSegmentFile> file);
  // Forgets segment `id` (its id is reused); returns its file, for the
  // caller to let go of outside its lock (the last reference unmaps it).
  std::shared_ptr<const LogSegmentFile> Remove(uint32_t id);
  // Keeps the first n ids (Open, cutting a torn batch).
  void Truncate(size_t n) { segs_.resize(n); }

  // Sorts places by place; the files of the segments they lie in, in that
  // order (what ReadLogRows takes).
  std::vector<std::shared_ptr<const LogSegmentFile>> SortPlaces(
      std::vector<LogPlace>* places) const;

  // A place in the log's order: segment `id`'s number and its units so far
  // (number << 32 | units). And back: by segment id, the first unit that
  // lies past `position` (0: all of a later segment; ~0: none).
  uint64_t PositionOf(uint32_t id) const { return uint64_t{segs_[id].seq} << 32 | segs_[id].units; }
  std::vector<uint64_t> FirstUnitsPast(uint64_t position) const;

  uint64_t DiskBytes() const;
  uint64_t MemoryBytes() const;
  // The smallest seq of the segments other than `id` (~0 when none): a
  // tombstone of segment id with a killed seq below it shadows nothing.
  uint32_t OldestExcept(uint32_t id) const;

  // The sealed segments (all but `head`) worth compacting before a batch
  // of `incoming` bytes, fewest live bytes first, copying at most
  // most_copied bytes (unless short of budget): those under half live;
  // those under 0.9 live while the files would pass target_disk_ratio
  // times the live bytes; any not full while the batch would pass the
  // budget and compaction can make room for it (as long as their copies
  // fit the budget); and, when tombstones still needed pass 1/8 of the
  // live bytes, the oldest. Tombstones count as live while a segment they
  // may shadow exists.
  std::vector<uint32_t> ChooseVictims(uint32_t head, uint64_t incoming,
                                      const LogCompaction& policy) const;

 private:
  const size_t unit_;
  const uint32_t units_per_segment_;
  const uint32_t max_segments_;  // ids that keep places below 2^32 - 1
  std::vector<Segment> segs_;
  std::vector<uint32_t> free_;  // ids of removed segments
};

// Reads the records of `file` from offset `start` to `end` (whole units)
// about a MiB at a time: fn(at, data, n) gets n bytes of whole records
// starting at offset `at` (a record longer than that comes whole in a
// larger read; one that `end` or the file cuts short comes last, as far as
// it goes); stops at fn's first error. Only the records' lengths are read
// here: fn checks them. Errors: the OS's, naming `who` and the file;
// DATA_LOSS when the file ends before `end`.
absl::Status ReadRecordChunks(const std::string& who, const LogSegmentFile& file, size_t unit,
                              uint64_t start, uint64_t end,
                              absl::FunctionRef<absl::Status(uint64_t, const char*, size_t)> fn);

// Reads the row records at `places` (sorted by place; files[j]: the file
// of the j-th distinct segment among them), adjacent ones in one pread,
// checks each (checksum, its place's slice and key) and calls fn(place,
// row) in order;
// stops at fn's first error. Errors: DATA_LOSS naming `who`, the file and
// the offset of a damaged record; the OS's error of a failed read.
// Makes the new directory `dir` hold `files` (hard links, copies where the
// file system refuses links) and syncs it: a snapshot of a log. Errors
// name `who`, the file and the OS's error.
absl::Status LinkLogSegments(const std::string& who, const std::string& dir,
                             const std::vector<std::shared_ptr<const LogSegmentFile>>& files);

// Whether reads of rows first ask the kernel for all their pages at once
// (posix_fadvise WILLNEED: the disk reads them in parallel, where copying
// them would fault them in one at a time): for the kReads reads after one
// that found a row on the disk (a major page fault while copying), so that
// rows in the page cache cost no system call. A table larger than the page
// cache keeps it on: an advised read finds rows on the disk when the
// kernel had not started reading them, and a read after kReads does.
// Thread-safe.
class LogReadAdvice {
 public:
  static constexpr uint32_t kReads = 1024;

  // always: every read advises (tests).
  explicit LogReadAdvice(bool always = false) : always_(always) {}
  // Whether the read about to start advises (counted).
  bool Take();
  // A read's copies took `major_faults` major page faults.
  void Saw(uint64_t major_faults);

 private:
  const bool always_;
  std::atomic<uint32_t> reads_{0};  // left to advise
};

// Reads the rows at `places` (sorted by place; files: their segments, in
// that order) and calls fn(place, row bytes) for each, after checking its
// record; with `advice` (may be null), asking for their pages first when
// it says so, and telling it whether the copies read the disk.
absl::Status ReadLogRows(const std::string& who, size_t unit, uint32_t units_per_segment,
                         const std::vector<LogPlace>& places,
                         const std::vector<std::shared_ptr<const LogSegmentFile>>& files,
                         LogReadAdvice* advice,
                         absl::FunctionRef<absl::Status(const LogPlace&, const char*)> fn);

// What ReplayLog reports, in log order.
struct LogReplay {
  // A segment file was opened; its id.
  absl::FunctionRef<absl::StatusOr<uint32_t>(std::shared_ptr<const LogSegmentFile>)> add;
  // A valid record at `unit` of segment `id`, of any kind (a kCommit ends
  // a complete batch, whose count and checksum were checked).
  absl::FunctionRef<void(uint32_t id, uint64_t unit, const row_log::Record& r, const char* rec)>
      record;
  // A torn batch was cut off the files: only the first n segments added
  // remain, the last with `units` units; the records since the last
  // commit are void.
  absl::FunctionRef<void(size_t n, uint64_t units)> cut;
  // False: a torn batch is DATA_LOSS, and the files are left as they are
  // (a store opened read-only: a snapshot in a checkpoint).
  bool may_cut = true;
};

// Replays the segment files of `dir` (rows of row_bytes; each file mapped
// over segment_bytes) in log order, each read about a MiB at a time
// (ReadRecordChunks), and cuts a trailing batch without a valid commit off
// the files (a torn write: truncates one file, deletes those after it;
// unless !to.may_cut).
// *next_seq: the number for the next segment. Errors, naming `who` and the
// file: INVALID_ARGUMENT for segments of another row_bytes; DATA_LOSS for a
// damaged record with data after it in a later segment (a batch syncs a
// full segment before it starts the next, so that is no torn write); the
// OS's.
absl::Status ReplayLog(const std::string& who, const std::string& dir, int dir_fd, size_t unit,
                       uint32_t row_bytes, size_t segment_bytes, const LogReplay& to,
                       uint32_t* next_seq);

}  // namespace ps

#endif  // PS_SERVER_STORE_LOG_SEGMENTS_H_
