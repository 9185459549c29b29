#include "server/store/log_segments.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/store/log_format.h"
#include "server/store/mapped_copy.h"

namespace ps {
namespace {

constexpr size_t kReadRunBytes = size_t{256} << 10;  // one pread, at most
constexpr uint64_t kPageBytes = 4096;  // what a fault of a mapping reads (MADV_RANDOM)

// The calling thread's major page faults so far (pages read from a disk).
uint64_t MajorFaults() {
  struct rusage usage;
  return getrusage(RUSAGE_THREAD, &usage) == 0 ? static_cast<uint64_t>(usage.ru_majflt) : 0;
}

const char* MapFile(int fd, size_t bytes) {
  if (bytes == 0 || !CatchMappedReadFaults()) return nullptr;
  void* map = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return nullptr;
  // Rows are read at random: a fault reads its page, not the kernel's
  // read-around of it (a read asks for all its rows' pages at once
  // instead, LogReadAdvice; longer reads are preads, read ahead).
  (void)madvise(map, bytes, MADV_RANDOM);
  return static_cast<const char*>(map);
}

}  // namespace

LogSegmentFile::LogSegmentFile(int fd, uint32_t seq, std::string path, size_t map_bytes)
    : fd(fd),
      seq(seq),
      path(std::move(path)),
      map(MapFile(fd, map_bytes)),
      map_bytes(map == nullptr ? 0 : map_bytes) {}

LogSegmentFile::~LogSegmentFile() {
  if (map != nullptr) munmap(const_cast<char*>(map), map_bytes);
  close(fd);
}

int LogSegmentFile::Read(char* p, size_t n, uint64_t off, size_t* got) const {
  if (n <= kPageBytes && off + n <= map_bytes) {
    // Where the log points, the file has its records (a row's place is set
    // once its batch is written).
    *got = n;
    return CopyFromMapping(p, map + off, n);
  }
  return row_log::ReadAll(fd, p, n, off, got);
}

LogSegments::LogSegments(size_t unit, uint32_t units_per_segment)
    : unit_(unit),
      units_per_segment_(units_per_segment),
      max_segments_((kNoSegment - 1) / std::max(units_per_segment, 1u)) {}

uint32_t LogSegments::Add(std::shared_ptr<const LogSegmentFile> file) {
  uint32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (segs_.size() < max_segments_) {
    id = static_cast<uint32_t>(segs_.size());
    segs_.emplace_back();
  } else {
    return kNoSegment;
  }
  const uint32_t seq = file->seq;
  segs_[id] = Segment{std::move(file), seq};
  return id;
}

std::shared_ptr<const LogSegmentFile> LogSegments::Remove(uint32_t id) {
  std::shared_ptr<const LogSegmentFile> file = std::move(segs_[id].file);
  segs_[id] = Segment{};
  free_.push_back(id);
  return file;
}

std::vector<std::shared_ptr<const LogSegmentFile>> LogSegments::SortPlaces(
    std::vector<LogPlace>* places) const {
  std::sort(places->begin(), places->end(),
            [](const LogPlace& x, const LogPlace& y) { return x.place < y.place; });
  std::vector<std::shared_ptr<const LogSegmentFile>> files;
  for (size_t i = 0; i < places->size(); ++i) {
    const uint32_t id = IdOf((*places)[i].place);
    if (i == 0 || id != IdOf((*places)[i - 1].place)) files.push_back(segs_[id].file);
  }
  return files;
}

std::vector<uint64_t> LogSegments::FirstUnitsPast(uint64_t position) const {
  const uint32_t seq = static_cast<uint32_t>(position >> 32);
  std::vector<uint64_t> from(segs_.size());
  for (uint32_t id = 0; id < from.size(); ++id) {
    from[id] = segs_[id].seq > seq ? 0 : segs_[id].seq == seq ? position & 0xffffffff : ~0ull;
  }
  return from;
}

uint64_t LogSegments::DiskBytes() const {
  uint64_t units = 0;
  for (const Segment& seg : segs_) units += seg.units;
  return units * unit_;
}

uint64_t LogSegments::MemoryBytes() const {
  uint64_t bytes = sizeof(*this) + segs_.capacity() * sizeof(Segment) + free_.capacity() * 4;
  for (const Segment& seg : segs_) {
    // The file, its path and the shared_ptr's control block.
    if (seg.file != nullptr) bytes += sizeof(LogSegmentFile) + seg.file->path.capacity() + 32;
  }
  return bytes;
}

uint32_t LogSegments::OldestExcept(uint32_t id) const {
  uint32_t oldest = ~uint32_t{0};
  for (uint32_t j = 0; j < segs_.size(); ++j) {
    if (j != id && segs_[j].file != nullptr) oldest = std::min(oldest, segs_[j].seq);
  }
  return oldest;
}

std::vector<uint32_t> LogSegments::ChooseVictims(uint32_t head, uint64_t incoming,
                                                 const LogCompaction& policy) const {
  struct Candidate {
    double live_fraction;
    uint64_t bytes, live;
    uint32_t id, seq;
  };
  uint32_t oldest = ~uint32_t{0}, second = ~uint32_t{0};  // seqs
  for (const Segment& seg : segs_) {
    if (seg.file == nullptr) continue;
    if (seg.seq < oldest) {
      second = oldest, oldest = seg.seq;
    } else {
      second = std::min(second, seg.seq);
    }
  }
  std::vector<Candidate> sealed;
  uint64_t disk = 0, live = 0, tombs = 0;
  for (uint32_t id = 0; id < segs_.size(); ++id) {
    const Segment& seg = segs_[id];
    if (seg.file == nullptr) continue;
    const uint32_t oldest_other = seg.seq == oldest ? second : oldest;
    const uint64_t tomb = oldest_other <= seg.max_killed ? seg.erase_bytes : 0;
    const uint64_t bytes = seg.units * unit_;
    const uint64_t l = std::min(bytes, seg.live_rows * unit_ + tomb);
    disk += bytes, live += l, tombs += tomb;
    if (id != head && bytes > 0) {
      sealed.push_back(
          {static_cast<double>(l) / static_cast<double>(bytes), bytes, l, id, seg.seq});
    }
  }
  std::sort(sealed.begin(), sealed.end(), [](const Candidate& x, const Candidate& y) {
    return x.live_fraction < y.live_fraction;
  });
  const uint64_t budget = policy.disk_budget;
  uint64_t projected = disk + incoming, copied = 0;
  std::vector<uint32_t> victims;
  auto take = [&](const Candidate& c) {
    victims.push_back(c.id);
    copied += c.live, projected -= c.bytes - c.live;
  };
  // Compacting for space only helps when the live bytes and the batch fit.
  const bool can_fit = budget > 0 && live + incoming + 2 * unit_ <= budget;
  for (const Candidate& c : sealed) {
    const bool short_of_space = can_fit && projected > budget;
    const bool over_target =
        static_cast<double>(projected) > policy.target_disk_ratio * static_cast<double>(live);
    if (!(c.live_fraction < 0.5 || (over_target && c.live_fraction < 0.9) ||
          (short_of_space && c.live_fraction < 1))) {
      break;
    }
    if (!short_of_space && copied + c.live > policy.most_copied) break;
    if (budget > 0 && disk + copied + c.live + 2 * unit_ > budget) continue;  // no room to copy
    take(c);
  }
  if (tombs * 8 > live && !sealed.empty()) {
    const Candidate& first = *std::min_element(
        sealed.begin(), sealed.end(), [](const auto& x, const auto& y) { return x.seq < y.seq; });
    if (std::find(victims.begin(), victims.end(), first.id) == victims.end() &&
        copied + first.live <= policy.most_copied &&
        (budget == 0 || disk + copied + first.live + 2 * unit_ <= budget)) {
      take(first);
    }
  }
  return victims;
}

absl::Status ReplayLog(const std::string& who, const std::string& dir, int dir_fd, size_t unit,
                       uint32_t row_bytes, size_t segment_bytes, const LogReplay& to,
                       uint32_t* next_seq) {
  std::vector<uint32_t> seqs;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return row_log::OsError(who, errno, "listing", dir);
  while (const dirent* e = readdir(d)) {
    uint32_t seq;
    if (row_log::ParseSegmentName(e->d_name, &seq)) seqs.push_back(seq);
  }
  closedir(d);
  std::sort(seqs.begin(), seqs.end());
  auto path = [&](size_t k) { return dir + "/" + row_log::SegmentName(seqs[k]); };
  uint32_t records = 0, crc = 0;  // of the batch being read
  size_t keep_file = 0;           // where the last complete batch ends
  uint64_t keep_bytes = 0;
  size_t bad_file = seqs.size();  // where a damaged record is, and why
  uint64_t bad_off = 0;
  std::string why;
  for (size_t k = 0; k < seqs.size() && why.empty(); ++k) {
    const int fd = open(path(k).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return row_log::OsError(who, errno, "opening", path(k));
    auto file = std::make_shared<const LogSegmentFile>(fd, seqs[k], path(k), segment_bytes);
    struct stat st;
    if (fstat(fd, &st) != 0) return row_log::OsError(who, errno, "reading the size of", path(k));
    // The segment is added once its first bytes say it is one of this
    // store's (an empty file too: it is then damage or a torn write).
    uint32_t id = 0;
    bool added = false;
    const auto add = [&](const char* data, size_t n) -> absl::Status {
      row_log::Header first;  // before its checksum: a wrong row_bytes fails that too
      const bool header =
          n >= sizeof first && (std::memcpy(&first, data, sizeof first),
                                first.kind_units == (row_log::kSegmentHeader | 1 << 8));
      if (header && first.b == row_log::kMagic && first.a != row_bytes) {
        return absl::InvalidArgumentError(
            absl::StrCat(who, ": ", path(k), " holds rows of ", first.a, " bytes, not ", row_bytes,
                         " (open it with the row_bytes it was written with)"));
      }
      if (header && first.b == row_log::kMagicV1) {
        return absl::FailedPreconditionError(absl::StrCat(
            who, ": ", path(k),
            " is in format 1 of the log (zlib crc32 checksums), which this build no longer reads "
            "(format 2: CRC-32C); restore the table from a checkpoint written by the earlier "
            "build, or remove the directory"));
      }
      const absl::StatusOr<uint32_t> got = to.add(file);
      if (!got.ok()) return got.status();
      id = *got, added = true;
      return absl::OkStatus();
    };
    records = crc = 0;  // a commit counts its batch's records in its segment
    // A damaged record ends the reading (its reason in `why`).
    const absl::Status read = ReadRecordChunks(
        who, *file, unit, 0, static_cast<uint64_t>(st.st_size),
        [&](uint64_t start, const char* data, size_t n) -> absl::Status {
          if (!added) {
            if (absl::Status s = add(data, n); !s.ok()) return s;
          }
          for (uint64_t at = 0; at < n;) {
            const uint64_t off = start + at;
            const char* rec = data + at;
            row_log::Record r;
            why = row_log::ParseRecord(rec, n - at, unit, &r);
            const bool header = r.kind == row_log::kSegmentHeader;
            if (why.empty() && ((off == 0) != header || (header && r.b != row_log::kMagic))) {
              why = "a misplaced or bad segment header";
            }
            if (why.empty() && r.kind == row_log::kCommit &&
                (r.b >> 32 != records || uint32_t(r.b) != crc)) {
              why = "a commit that does not match its batch";
            }
            if (!why.empty()) {
              bad_file = k, bad_off = off;
              return absl::CancelledError(why);
            }
            to.record(id, off / unit, r, rec);
            if (!header && r.kind != row_log::kCommit) ++records, crc = row_log::Crc(rec, 4, crc);
            at += r.units * unit;
            if (r.kind == row_log::kCommit)
              records = crc = 0, keep_file = k, keep_bytes = start + at;
          }
          return absl::OkStatus();
        });
    if (!read.ok() && why.empty()) return read;
    if (!added) {
      if (absl::Status s = add(nullptr, 0); !s.ok()) return s;
      why = "an empty segment", bad_file = k;
    }
  }
  for (size_t k = bad_file + 1; k < seqs.size(); ++k) {
    struct stat st;
    if (stat(path(k).c_str(), &st) == 0 && st.st_size > 0) {
      return absl::DataLossError(absl::StrCat(
          who, ": ", path(bad_file), " offset ", bad_off, ": ", why, ", and ", path(k),
          " after it holds data: the log is damaged before its last batch (restore the store "
          "from a snapshot or checkpoint)"));
    }
  }
  *next_seq = seqs.empty() ? 1 : seqs.back() + 1;
  if (why.empty() && records == 0) return absl::OkStatus();
  if (!to.may_cut) {
    return absl::DataLossError(absl::StrCat(
        who, ": the log ends in a batch cut short", why.empty() ? "" : absl::StrCat(" (", why, ")"),
        " after ", path(keep_file), " offset ", keep_bytes, "; the store is open read-only"));
  }
  // A torn batch: cut the files where the last complete one ends.
  for (size_t k = seqs.size(); k-- > keep_file;) {
    const bool whole = k > keep_file || keep_bytes == 0;
    if ((whole ? unlink(path(k).c_str())
               : truncate(path(k).c_str(), static_cast<off_t>(keep_bytes))) != 0) {
      return row_log::OsError(
          who, errno, whole ? "deleting the torn batch in" : "cutting the torn batch off", path(k));
    }
  }
  to.cut(keep_bytes == 0 ? 0 : keep_file + 1, keep_bytes / unit);
  if (fsync(dir_fd) != 0) return row_log::OsError(who, errno, "syncing", dir);
  return absl::OkStatus();
}

bool LogReadAdvice::Take() {
  if (always_) return true;
  uint32_t left = reads_.load(std::memory_order_relaxed);
  if (left == 0) return false;
  // Concurrent reads may take one count between them: advice, not a quota.
  reads_.compare_exchange_weak(left, left - 1, std::memory_order_relaxed);
  return true;
}

void LogReadAdvice::Saw(uint64_t major_faults) {
  if (major_faults > 0) reads_.store(kReads, std::memory_order_relaxed);
}

absl::Status ReadLogRows(const std::string& who, size_t unit, uint32_t units_per_segment,
                         const std::vector<LogPlace>& places,
                         const std::vector<std::shared_ptr<const LogSegmentFile>>& files,
                         LogReadAdvice* advice,
                         absl::FunctionRef<absl::Status(const LogPlace&, const char*)> fn) {
  const size_t most = std::max<size_t>(1, kReadRunBytes / unit);
  auto id_of = [&](const LogPlace& p) { return p.place / units_per_segment; };
  const bool advised = advice != nullptr && advice->Take();
  if (advised) {
    // One call a page of records, every one before the first copy waits.
    uint64_t asked = ~uint64_t{0};  // the last page asked for, in file f
    for (size_t k = 0, f = 0; k < places.size(); ++k) {
      if (k > 0 && id_of(places[k]) != id_of(places[k - 1])) ++f, asked = ~uint64_t{0};
      const uint64_t at = places[k].place % units_per_segment * uint64_t{unit};
      const uint64_t last = (at + unit - 1) / kPageBytes;
      if (at / kPageBytes == asked && last == asked) continue;
      asked = last;
      (void)posix_fadvise(files[f]->fd, static_cast<off_t>(at), static_cast<off_t>(unit),
                          POSIX_FADV_WILLNEED);
    }
  }
  const uint64_t faults = advice != nullptr ? MajorFaults() : 0;
  std::string buf;
  // Mapped rows requested ahead (the line a record starts in; measured
  // against two lines a row and 4-16 ahead): their misses overlap.
  constexpr size_t kAhead = 32;
  size_t ahead = 0, ahead_file = 0;  // the next place to request, its file
  const auto request_to = [&](size_t end) {
    for (; ahead < std::min(end, places.size()); ++ahead) {
      if (ahead > 0 && id_of(places[ahead]) != id_of(places[ahead - 1])) ++ahead_file;
      const uint64_t at = places[ahead].place % units_per_segment * uint64_t{unit};
      files[ahead_file]->Prefetch(at);
    }
  };
  size_t f = 0;  // files[f]: the file of places[i]
  for (size_t i = 0, j; i < places.size(); i = j) {
    request_to(i + kAhead);
    const uint32_t id = id_of(places[i]);
    if (i > 0 && id != id_of(places[i - 1])) ++f;
    // A run of places in one segment, each the same as or next to the last.
    for (j = i + 1;
         j < places.size() && id_of(places[j]) == id &&
         places[j].place - places[j - 1].place <= 1 && places[j].place - places[i].place < most;
         ++j) {
    }
    const LogSegmentFile& file = *files[f];
    const uint64_t off = places[i].place % units_per_segment * uint64_t{unit};
    buf.resize((places[j - 1].place - places[i].place + 1) * unit);
    size_t got;
    if (int err = file.Read(buf.data(), buf.size(), off, &got)) {
      return row_log::OsError(who, err, absl::StrCat("reading at offset ", off, " of"), file.path);
    }
    for (size_t k = i; k < j; ++k) {
      const uint64_t at = (places[k].place - places[i].place) * uint64_t{unit};
      row_log::Record r;
      std::string why = at >= got ? "the file ends before the record"
                                  : row_log::ParseRecord(&buf[at], got - at, unit, &r);
      const uint32_t slice = places[k].slice;
      if (why.empty() && (r.kind != row_log::kRow || r.a != slice || r.b != places[k].key)) {
        why = absl::StrCat("a record of kind ", r.kind, " with key ", r.b, " of slice ", r.a,
                           " where key ", places[k].key, " of slice ", slice, " should be");
      }
      if (!why.empty()) {
        return absl::DataLossError(absl::StrCat(
            who, ": ", file.path, " offset ", off + at, ": ", why,
            "; the file is damaged (restore the store from a snapshot or checkpoint)"));
      }
      if (absl::Status s = fn(places[k], &buf[at] + row_log::kHeaderBytes); !s.ok()) return s;
    }
  }
  if (advice != nullptr) advice->Saw(MajorFaults() - faults);
  return absl::OkStatus();
}

absl::Status ReadRecordChunks(const std::string& who, const LogSegmentFile& file, size_t unit,
                              uint64_t start, uint64_t end,
                              absl::FunctionRef<absl::Status(uint64_t, const char*, size_t)> fn) {
  constexpr uint64_t kChunkBytes = uint64_t{1} << 20;
  std::string data;
  for (uint64_t want = kChunkBytes; start < end;) {
    data.resize(std::min<uint64_t>(want, end - start));
    size_t got;
    if (int err = file.Read(data.data(), data.size(), start, &got)) {
      return row_log::OsError(who, err, absl::StrCat("reading at offset ", start, " of"),
                              file.path);
    }
    if (got == 0) {
      return absl::DataLossError(
          absl::StrCat(who, ": ", file.path, " ends at offset ", start, ", before ", end,
                       " (restore the store from a snapshot or checkpoint)"));
    }
    // The whole records in what was read.
    uint64_t n = 0;
    for (row_log::Header h; n + sizeof h <= got;) {
      std::memcpy(&h, data.data() + n, sizeof h);
      const uint64_t units = std::max<uint64_t>(h.kind_units >> 8, 1);
      if (n + units * unit > got) break;
      n += units * unit;
    }
    if (n == 0) {
      if (got == data.size() && data.size() < end - start) {
        want = 2 * data.size();  // a record longer than the read
        continue;
      }
      n = got;  // the file ends inside a record: the rest, for fn to find short
    }
    if (absl::Status s = fn(start, data.data(), n); !s.ok()) return s;
    start += n;
    want = kChunkBytes;
  }
  return absl::OkStatus();
}

absl::Status LinkLogSegments(const std::string& who, const std::string& dir,
                             const std::vector<std::shared_ptr<const LogSegmentFile>>& files) {
  if (int err = row_log::MakeDirs(dir))
    return row_log::OsError(who, err, "creating snapshot directory", dir);
  for (const auto& file : files) {
    const std::string to = dir + "/" + row_log::SegmentName(file->seq);
    int err = link(file->path.c_str(), to.c_str()) == 0 ? 0 : errno;
    if (err == EXDEV || err == EPERM || err == EMLINK) err = row_log::CopyFile(file->fd, to);
    if (err != 0)
      return row_log::OsError(who, err, absl::StrCat("linking ", file->path, " to"), to);
  }
  if (int err = row_log::SyncDir(dir)) return row_log::OsError(who, err, "syncing", dir);
  return absl::OkStatus();
}

}  // namespace ps
