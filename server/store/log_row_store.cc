#include "server/store/log_row_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "server/store/log_format.h"
#include "server/store/log_row_index.h"

namespace ps {

using row_log::kCommit;
using row_log::kDrop;
using row_log::kEntryBytes;
using row_log::kErase;
using row_log::kRow;
using row_log::Record;

namespace {

constexpr uint32_t kNone = LogRowIndex::kNone;
constexpr size_t kBlockEntries = 4096;  // erased keys in one record, at most
static_assert(LogRowStore::kHeaderBytes == row_log::kHeaderBytes, "one header size");

}  // namespace

struct LogRowStore::Op {
  uint8_t kind;  // kRow, kErase or kDrop
  uint32_t slice;
  uint64_t key;
  uint32_t arg;      // kRow: the row's place; kErase, kDrop: the killed seq
  uint32_t segment;  // id of the segment holding the record
  // The op of the erase entry at p.
  static Op Entry(const char* p, uint32_t segment) {
    Op op{kErase, 0, 0, 0, segment};
    row_log::GetEntry(p, &op.slice, &op.arg, &op.key);
    return op;
  }
};

class LogRowStore::Registry : public LogAppender::Registry {
 public:
  explicit Registry(LogRowStore* store) : store_(store) {}
  absl::StatusOr<uint32_t> Add(std::shared_ptr<const LogSegmentFile> file) override {
    absl::MutexLock l(&store_->mu_);
    const uint32_t id = store_->segs_.Add(std::move(file));
    if (id != LogSegments::kNoSegment) return id;
    return absl::ResourceExhaustedError(
        absl::StrCat(store_->where(), ": ", store_->segs_.ids(),
                     " segments, as many as places can address; use a larger segment_bytes"));
  }
  void Remove(uint32_t id) override {
    std::shared_ptr<const LogSegmentFile> file;
    absl::MutexLock l(&store_->mu_);
    file = store_->segs_.Remove(id);  // unmapped after the lock is let go
  }

 private:
  LogRowStore* const store_;
};

LogRowStore::LogRowStore(const RowStoreOptions& options, const LogRowStoreOptions& log)
    : RowStore(options.row_bytes),
      options_(options),
      log_(log),
      unit_(kHeaderBytes + options.row_bytes),
      units_per_segment_(
          static_cast<uint32_t>(std::min<uint64_t>(log.segment_bytes / unit_, 1u << 24))),
      block_entries_(
          std::min(kBlockEntries, ((units_per_segment_ - 1) * unit_ - kHeaderBytes) / kEntryBytes)),
      account_(options.shared_disk_budget),
      segs_(unit_, units_per_segment_),
      advice_(log.advise_every_read) {}

LogRowStore::~LogRowStore() {
  if (dir_fd_ >= 0) close(dir_fd_);
  if (lock_fd_ >= 0) close(lock_fd_);
}

absl::StatusOr<std::unique_ptr<LogRowStore>> LogRowStore::Open(const RowStoreOptions& options) {
  return Open(options, LogRowStoreOptions());
}

absl::StatusOr<std::unique_ptr<LogRowStore>> LogRowStore::Open(const RowStoreOptions& options,
                                                               const LogRowStoreOptions& log) {
  if (absl::Status s = CheckOptions(options, log); !s.ok()) return s;
  std::unique_ptr<LogRowStore> store(new LogRowStore(options, log));
  if (absl::Status s = store->Init(); !s.ok()) return s;
  return store;
}

absl::Status LogRowStore::CheckOptions(const RowStoreOptions& options,
                                       const LogRowStoreOptions& log) {
  const std::string who = absl::StrCat("LogRowStore ", options.name, " (", options.dir, "): ");
  if (options.dir.empty() || options.row_bytes == 0 || options.row_bytes > (1u << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, "needs a dir and row_bytes in [1, 2^24], not ", options.row_bytes));
  }
  if (log.segment_bytes / (kHeaderBytes + options.row_bytes) < 4 || !(log.target_disk_ratio > 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, "segment_bytes (", log.segment_bytes, ") must hold 4 records of ",
                     kHeaderBytes + options.row_bytes, " bytes and target_disk_ratio (",
                     log.target_disk_ratio, ") must be above 1"));
  }
  return absl::OkStatus();
}

absl::Status LogRowStore::Check(const RowStoreOptions& options, const LogRowStoreOptions& log) {
  if (absl::Status s = CheckOptions(options, log); !s.ok()) return s;
  // The replay's checks alone: segments numbered, records and cuts ignored.
  const size_t unit = kHeaderBytes + options.row_bytes;
  const uint64_t units_per_segment = std::min<uint64_t>(log.segment_bytes / unit, 1u << 24);
  uint32_t segments = 0, next_seq = 0;
  auto add = [&](std::shared_ptr<const LogSegmentFile>) -> absl::StatusOr<uint32_t> {
    return segments++;
  };
  auto record = [](uint32_t, uint64_t, const Record&, const char*) {};
  auto cut = [](size_t, uint64_t) {};
  return ReplayLog(absl::StrCat("LogRowStore ", options.name, " (", options.dir, ")"), options.dir,
                   /*dir_fd=*/-1, unit, static_cast<uint32_t>(options.row_bytes),
                   units_per_segment * unit, LogReplay{add, record, cut, /*may_cut=*/false},
                   &next_seq);
}

std::string LogRowStore::where() const {
  return absl::StrCat("LogRowStore ", options_.name, " (", options_.dir, ")");
}

absl::Status LogRowStore::IoError(int err, const std::string& what, const std::string& path) const {
  return row_log::OsError(where(), err, what, path);
}

absl::Status LogRowStore::Init() {
  if (int err = log_.read_only ? 0 : row_log::MakeDirs(options_.dir)) {
    return IoError(err, "creating directory", options_.dir);
  }
  dir_fd_ = open(options_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0) return IoError(errno, "opening directory", options_.dir);
  const std::string lock = options_.dir + "/LOCK";
  if (!log_.read_only && (lock_fd_ = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0)
    return IoError(errno, "opening", lock);
  if (!log_.read_only && flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return IoError(errno, "locking", lock);
    return absl::FailedPreconditionError(absl::StrCat(
        where(), ": ", lock, " is locked: another store has the directory open (close it first)"));
  }
  append_ = LogAppender::Log{where(), options_.dir,       dir_fd_,
                             unit_,   units_per_segment_, static_cast<uint32_t>(row_bytes())};
  absl::MutexLock w(&write_mu_);
  if (log_.read_only) broken_ = "it was opened read-only";
  absl::Status replayed = Replay();
  SyncSharedLocked();
  return replayed;
}

void LogRowStore::SyncSharedLocked() {
  absl::ReaderMutexLock l(&mu_);
  account_.Sync(segs_.DiskBytes());
}

absl::Status LogRowStore::Replay() {
  absl::MutexLock l(&mu_);
  std::vector<Op> pending;  // of the batch being read
  auto add = [&](std::shared_ptr<const LogSegmentFile> file)
                 ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<uint32_t> {
    const uint32_t id = segs_.Add(std::move(file));
    if (id != LogSegments::kNoSegment) return id;
    return absl::ResourceExhaustedError(absl::StrCat(where(), ": too many segments"));
  };
  auto record = [&](uint32_t id, uint64_t unit, const Record& r, const char* rec)
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                      segs_[id].units = unit + r.units;
                      if (r.kind == kRow)
                        pending.push_back(Op{kRow, r.a, r.b, segs_.Place(id, unit), id});
                      if (r.kind == kDrop)
                        pending.push_back(Op{kDrop, r.a, 0, static_cast<uint32_t>(r.b), id});
                      for (uint32_t i = 0; r.kind == kErase && i < r.a; ++i) {
                        pending.push_back(Op::Entry(rec + kHeaderBytes + i * kEntryBytes, id));
                      }
                      if (r.kind != kCommit) return;
                      ApplyLocked(pending);
                      pending.clear();
                      meta_.assign(rec + kHeaderBytes, r.a);
                    };
  auto cut = [&](size_t n, uint64_t units) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    segs_.Truncate(n);
    if (n > 0) segs_[static_cast<uint32_t>(n - 1)].units = units;
  };
  index_.BeginBulk();
  const absl::Status replayed = ReplayLog(
      where(), options_.dir, dir_fd_, unit_, static_cast<uint32_t>(row_bytes()),
      size_t{units_per_segment_} * unit_, LogReplay{add, record, cut, !log_.read_only}, &next_seq_);
  index_.EndBulk();
  return replayed;
}

void LogRowStore::ApplyLocked(absl::Span<const Op> ops) {
  // Index slots a few ops ahead requested (harmless for any op): readers
  // wait for this loop, which would otherwise wait for a miss a row.
  constexpr size_t kAhead = 8;
  for (size_t j = 0; j < std::min(kAhead, ops.size()); ++j)
    index_.Prefetch(ops[j].slice, ops[j].key);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i + kAhead < ops.size()) index_.Prefetch(ops[i + kAhead].slice, ops[i + kAhead].key);
    const Op& op = ops[i];
    if (op.kind == kRow) {
      const uint32_t old = index_.Put(op.slice, op.key, op.arg);
      if (old != kNone) --segs_[segs_.IdOf(old)].live_rows;
      ++segs_[op.segment].live_rows;
      continue;
    }
    LogSegments::Segment& seg = segs_[op.segment];
    seg.erase_bytes += op.kind == kErase ? kEntryBytes : unit_;
    seg.max_killed = std::max(seg.max_killed, op.arg);
    // An erase or a drop kills rows in segments up to its killed seq only.
    std::vector<uint64_t> keys;
    if (op.kind == kErase) {
      const uint32_t place = index_.Find(op.slice, op.key);
      if (place != kNone && segs_[segs_.IdOf(place)].seq <= op.arg) keys.push_back(op.key);
    } else {
      std::vector<bool> killed(segs_.ids());  // by segment id
      for (uint32_t id = 0; id < killed.size(); ++id) killed[id] = segs_[id].seq <= op.arg;
      index_.Of(op.slice).ForEach([&](uint64_t key, uint32_t place) {
        if (killed[place / units_per_segment_]) keys.push_back(key);
      });
    }
    for (uint64_t key : keys) --segs_[segs_.IdOf(index_.Erase(op.slice, key))].live_rows;
  }
}

absl::Status LogRowStore::Write(const Batch& batch) {
  absl::MutexLock w(&write_mu_);
  if (!broken_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(where(), ": ", broken_, "; reopen it"));
  }
  for (const Batch::Put& put : batch.puts) {
    if (put.row == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where(), ": the put of key ", put.key,
                                                     " of slice ", put.slice, " has no row"));
    }
  }
  if (batch.puts.empty() && batch.erases.empty() && batch.dropped_slices.empty() &&
      batch.meta.empty()) {
    return absl::OkStatus();
  }
  std::string meta = batch.meta;
  if (meta.empty()) {
    absl::ReaderMutexLock l(&mu_);
    meta = meta_;
  }
  const uint64_t meta_units = UnitsFor(kHeaderBytes + meta.size());
  if (meta_units >= units_per_segment_) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": a meta of ", meta.size(), " bytes does not fit a segment"));
  }
  // The most the batch appends: its records, and a header per segment.
  uint64_t units = batch.puts.size() + batch.dropped_slices.size() + meta_units +
                   UnitsFor(batch.erases.size() * kEntryBytes) +
                   batch.erases.size() / block_entries_ + 1;
  units += units / (units_per_segment_ - 1) + 2;
  const uint64_t incoming = units * unit_;
  uint64_t budget;
  {
    absl::ReaderMutexLock l(&mu_);
    budget = account_.Limit(options_.disk_budget_bytes, segs_.DiskBytes());
  }
  const LogCompaction policy{log_.target_disk_ratio, std::max(2 * log_.segment_bytes, 4 * incoming),
                             budget};
  for (int round = 0; round < 8; ++round) {  // more than one only to fit the budget
    std::vector<uint32_t> victims;
    {
      absl::ReaderMutexLock l(&mu_);
      if (round > 0 && (budget == 0 || segs_.DiskBytes() + incoming <= budget)) break;
      victims = segs_.ChooseVictims(head_, incoming, policy);
    }
    if (victims.empty()) break;
    absl::Status compacted = CompactLocked(victims);
    SyncSharedLocked();
    if (!compacted.ok()) return compacted;
  }
  if (budget > 0) {
    absl::ReaderMutexLock l(&mu_);
    const uint64_t disk = segs_.DiskBytes();
    if (disk + incoming > budget) {
      return absl::ResourceExhaustedError(absl::StrCat(
          where(), ": a batch of ", batch.puts.size(), " puts and ", batch.erases.size(),
          " erases (up to ", incoming, " bytes) would take the files to ", disk + incoming,
          " bytes, past ", account_.Describe(budget, options_.disk_budget_bytes),
          "; nothing of it was applied (raise the budget or keep fewer rows)"));
    }
  }
  // Reserved while the batch is written (other stores write meanwhile).
  const std::optional<DiskAccount::Reservation> reserved = account_.Reserve(incoming);
  if (!reserved.has_value()) {
    return absl::ResourceExhaustedError(
        absl::StrCat(where(), ": a batch of up to ", incoming, " bytes would pass ",
                     account_.DescribeShared(), "; nothing of it was applied"));
  }
  Registry registry(this);
  LogAppender app(append_, &registry, HeadLocked(), &next_seq_);
  std::vector<Op> ops;
  if (absl::Status s = AppendBatchLocked(batch, meta, &app, &ops); !s.ok()) {
    RollbackLocked(&app);
    SyncSharedLocked();
    return absl::Status(s.code(), absl::StrCat(s.message(), "; nothing of the batch was applied",
                                               broken_.empty() ? "" : ", but " + broken_));
  }
  constexpr size_t kOpsAtOnce = 256;  // a batch readers may see in parts
  FinishLocked(app, ops, meta, batch.readers_may_see_parts ? kOpsAtOnce : ops.size());
  head_unsynced_ = !batch.sync;  // a synced commit syncs the head's earlier batches
  SyncSharedLocked();
  return absl::OkStatus();
}

absl::Status LogRowStore::AppendBatchLocked(const Batch& batch, const std::string& meta,
                                            LogAppender* app, std::vector<Op>* ops) {
  // Killed seqs: of each dropped slice, the last segment with a row of it;
  // of each erased key, its row's segment (0: no row).
  std::vector<std::pair<uint32_t, uint32_t>> drops;
  absl::flat_hash_map<std::pair<uint32_t, uint64_t>, uint32_t> killed;
  bool roll = false;  // a dropped slice has rows in the head: drop it in a new segment
  {
    absl::ReaderMutexLock l(&mu_);
    const std::vector<uint32_t>& dropped = batch.dropped_slices;
    for (uint32_t slice : dropped) {
      const LogRowIndex& index = index_.Of(slice);
      if (index.size() == 0 ||
          std::any_of(drops.begin(), drops.end(), [&](auto& d) { return d.first == slice; })) {
        continue;
      }
      std::vector<bool> holds(segs_.ids());  // by id: a segment with a row of the slice
      index.ForEach([&](uint64_t, uint32_t place) { holds[place / units_per_segment_] = true; });
      uint32_t seq = 0;
      for (uint32_t id = 0; id < holds.size(); ++id) {
        if (holds[id]) seq = std::max(seq, segs_[id].seq);
      }
      drops.emplace_back(slice, seq);
      roll |= seq >= app->seq();  // 0 without a head
    }
    for (const Batch::Erase& e : batch.erases) {
      const bool dropped_too = std::find(dropped.begin(), dropped.end(), e.slice) != dropped.end();
      const uint32_t place = dropped_too ? kNone : index_.Find(e.slice, e.key);
      killed.emplace(std::make_pair(e.slice, e.key),
                     place == kNone ? 0 : segs_[segs_.IdOf(place)].seq);
    }
  }
  if (roll) {
    if (absl::Status s = app->StartSegment(); !s.ok()) return s;
  }
  for (const auto& [slice, seq] : drops) {
    if (absl::Status s = app->Append(kDrop, slice, seq, nullptr, 0); !s.ok()) return s;
    ops->push_back(Op{kDrop, slice, 0, seq, app->segment()});
  }
  for (const Batch::Put& put : batch.puts) {
    uint32_t place;
    if (absl::Status s = app->Append(kRow, put.slice, put.key, put.row, row_bytes(), &place);
        !s.ok()) {
      return s;
    }
    ops->push_back(Op{kRow, put.slice, put.key, place, app->segment()});
    if (killed.empty()) continue;
    if (auto it = killed.find(std::make_pair(put.slice, put.key)); it != killed.end()) {
      it->second = app->seq();
    }
  }
  std::string entries;
  for (const Batch::Erase& e : batch.erases) {
    uint32_t& seq = killed[std::make_pair(e.slice, e.key)];
    if (seq != 0) row_log::PutEntry(&entries, e.slice, seq, e.key);
    seq = 0;  // one entry per key
  }
  if (absl::Status s = AppendErases(app, entries, ops); !s.ok()) return s;
  return app->Commit(meta, batch.sync);
}

LogAppender::Head LogRowStore::HeadLocked() const {
  if (head_ == LogSegments::kNoSegment) return {};
  absl::ReaderMutexLock l(&mu_);
  return LogAppender::Head{head_, segs_[head_].file, segs_[head_].units};
}

absl::Status LogRowStore::AppendErases(LogAppender* app, const std::string& entries,
                                       std::vector<Op>* ops) const {
  for (size_t at = 0; at < entries.size();) {
    const size_t n = std::min(block_entries_, (entries.size() - at) / kEntryBytes);
    if (absl::Status s =
            app->Append(kErase, static_cast<uint32_t>(n), 0, &entries[at], n * kEntryBytes);
        !s.ok()) {
      return s;
    }
    for (size_t i = 0; i < n; ++i, at += kEntryBytes) {
      ops->push_back(Op::Entry(&entries[at], app->segment()));
    }
  }
  return absl::OkStatus();
}

void LogRowStore::FinishLocked(const LogAppender& app, absl::Span<const Op> ops,
                               const std::string& meta, size_t chunk) {
  for (; ops.size() > chunk; ops.remove_prefix(chunk)) {
    absl::MutexLock l(&mu_);
    ApplyLocked(ops.first(chunk));
  }
  absl::MutexLock l(&mu_);
  ApplyLocked(ops);
  for (const auto& [id, units] : app.sizes()) segs_[id].units = units;
  meta_ = meta;
  head_ = app.segment();
}

void LogRowStore::RollbackLocked(LogAppender* app) {
  if (std::string failed = app->Rollback(); !failed.empty()) {
    broken_ = "undoing a failed batch failed (" + failed + ")";
  }
}

absl::Status LogRowStore::CompactLocked(const std::vector<uint32_t>& victims) {
  Registry registry(this);
  LogAppender app(append_, &registry, HeadLocked(), &next_seq_);
  std::vector<Op> ops;
  std::string entries;
  std::vector<std::pair<uint32_t, uint32_t>> drops;
  absl::Status s;
  for (size_t i = 0; i < victims.size() && s.ok(); ++i) {
    s = CopyLiveLocked(victims[i], &app, &ops, &entries, &drops);
  }
  for (size_t i = 0; i < drops.size() && s.ok(); ++i) {
    s = app.Append(kDrop, drops[i].first, drops[i].second, nullptr, 0);
    ops.push_back(Op{kDrop, drops[i].first, 0, drops[i].second, app.segment()});
  }
  if (s.ok()) s = AppendErases(&app, entries, &ops);
  const std::string meta = this->meta();
  if (s.ok() && !ops.empty()) s = app.Commit(meta);
  if (!s.ok()) {
    RollbackLocked(&app);
    return s;
  }
  // Its moves change no row: readers may see some applied before others,
  // and wait for a chunk of them (256) at most.
  if (!ops.empty()) FinishLocked(app, ops, meta, /*chunk=*/256);
  // The victims deleted, oldest first, now that what counts in them is elsewhere.
  std::vector<std::pair<uint32_t, uint32_t>> order;  // seq, id
  {
    absl::ReaderMutexLock l(&mu_);
    for (uint32_t id : victims) {
      if (segs_[id].live_rows != 0) {
        return absl::InternalError(absl::StrCat(where(), ": compacted segment ", segs_[id].seq,
                                                " still has ", segs_[id].live_rows, " rows"));
      }
      order.emplace_back(segs_[id].seq, id);
    }
  }
  std::sort(order.begin(), order.end());
  for (const auto& [seq, id] : order) {
    const std::string path = options_.dir + "/" + row_log::SegmentName(seq);
    if (unlink(path.c_str()) != 0) return IoError(errno, "deleting compacted segment", path);
    std::shared_ptr<const LogSegmentFile> file;  // unmapped once the lock is let go
    absl::MutexLock l(&mu_);
    file = segs_.Remove(id);
  }
  if (fsync(dir_fd_) != 0) return IoError(errno, "syncing directory", options_.dir);
  return absl::OkStatus();
}

absl::Status LogRowStore::CopyLiveLocked(uint32_t id, LogAppender* app, std::vector<Op>* ops,
                                         std::string* entries,
                                         std::vector<std::pair<uint32_t, uint32_t>>* drops) {
  std::shared_ptr<const LogSegmentFile> file;
  uint64_t bytes;
  uint32_t oldest;  // of the other segments: tombstones killing below it are not needed
  {
    absl::ReaderMutexLock l(&mu_);
    const LogSegments::Segment& seg = segs_[id];
    file = seg.file, bytes = seg.units * unit_, oldest = segs_.OldestExcept(id);
    if (seg.live_rows == 0 && (seg.erase_bytes == 0 || oldest > seg.max_killed)) {
      return absl::OkStatus();  // nothing to keep
    }
  }
  // A chunk of whole records at a time, not the whole segment (the buffer).
  return ReadRecordChunks(
      where(), *file, unit_, unit_, bytes, [&](uint64_t start, const char* data, size_t n) {
        std::vector<uint64_t> live;  // offsets in data of the live rows
        {
          absl::ReaderMutexLock l(&mu_);
          for (uint64_t off = 0; off < n;) {
            const char* rec = data + off;
            Record r;
            const std::string why = row_log::ParseRecord(rec, n - off, unit_, &r);
            if (!why.empty()) {
              return absl::DataLossError(absl::StrCat(
                  where(), ": ", file->path, " offset ", start + off, ": ", why,
                  " (compacting the segment); restore the store from a snapshot or checkpoint"));
            }
            const uint32_t place = segs_.Place(id, (start + off) / unit_);
            if (r.kind == kRow && index_.Find(r.a, r.b) == place) live.push_back(off);
            if (r.kind == kDrop && oldest <= r.b) drops->emplace_back(r.a, uint32_t(r.b));
            for (uint32_t i = 0; r.kind == kErase && i < r.a; ++i) {
              const Op e = Op::Entry(rec + kHeaderBytes + i * kEntryBytes, id);
              if (oldest <= e.arg && index_.Find(e.slice, e.key) == kNone) {
                row_log::PutEntry(entries, e.slice, e.arg, e.key);
              }
            }
            off += r.units * unit_;
          }
        }
        for (uint64_t at : live) {
          row_log::Header h;
          std::memcpy(&h, data + at, sizeof h);
          uint32_t place;
          if (absl::Status s =
                  app->Append(kRow, h.a, h.b, data + at + kHeaderBytes, row_bytes(), &place);
              !s.ok()) {
            return s;
          }
          ops->push_back(Op{kRow, h.a, h.b, place, app->segment()});
        }
        return absl::OkStatus();
      });
}

}  // namespace ps
