// LogRowStore's reads (server/store/log_row_store.h): rows by key, a slice's
// rows, the store's position, snapshots, meta and figures. They find rows
// under the shared lock and read the files without it.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/store/log_row_store.h"

namespace ps {
namespace {

constexpr uint32_t kNone = LogRowIndex::kNone;

}  // namespace

absl::Status LogRowStore::Read(uint32_t slice, absl::Span<const uint64_t> keys, char* dst,
                               bool* found) const {
  std::vector<RowRef> refs(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) refs[i] = RowRef{slice, keys[i]};
  return ReadMany(refs, dst, found);
}

absl::Status LogRowStore::ReadMany(absl::Span<const RowRef> refs, char* dst, bool* found) const {
  std::vector<LogPlace> places;
  std::vector<std::shared_ptr<const LogSegmentFile>> files;
  std::vector<uint32_t> at(refs.size());
  {
    absl::ReaderMutexLock l(&mu_);
    index_.FindMany(refs.data(), refs.size(), at.data());
    for (size_t i = 0; i < refs.size(); ++i) {
      found[i] = at[i] != kNone;
      if (found[i]) {
        places.push_back(LogPlace{refs[i].key, at[i], static_cast<uint32_t>(i), refs[i].slice});
      }
    }
    files = segs_.SortPlaces(&places);
  }
  return ReadLogRows(where(), unit_, units_per_segment_, places, files, &advice_,
                     [&](const LogPlace& p, const char* row) {
                       std::memcpy(dst + size_t{p.index} * row_bytes(), row, row_bytes());
                       return absl::OkStatus();
                     });
}

absl::Status LogRowStore::ForEach(uint32_t slice, RowFn fn) const {
  return ForEachSince(slice, 0, fn);
}

uint64_t LogRowStore::SliceRows(uint32_t slice) const {
  absl::ReaderMutexLock l(&mu_);
  return index_.Of(slice).size();
}

uint64_t LogRowStore::Position() const {
  absl::MutexLock w(&write_mu_);  // no batch is being written
  absl::ReaderMutexLock l(&mu_);
  return head_ == LogSegments::kNoSegment ? uint64_t{next_seq_} << 32 : segs_.PositionOf(head_);
}

absl::Status LogRowStore::ForEachSince(uint32_t slice, uint64_t position, RowFn fn) const {
  std::vector<LogPlace> places;
  std::vector<std::shared_ptr<const LogSegmentFile>> files;
  {
    absl::ReaderMutexLock l(&mu_);
    const LogRowIndex& index = index_.Of(slice);
    places.reserve(position == 0 ? index.size() : 0);
    const std::vector<uint64_t> from = segs_.FirstUnitsPast(position);
    index.ForEach([&](uint64_t key, uint32_t place) {
      if (place % units_per_segment_ >= from[place / units_per_segment_]) {
        places.push_back(LogPlace{key, place, 0, slice});
      }
    });
    files = segs_.SortPlaces(&places);
  }
  return ReadLogRows(where(), unit_, units_per_segment_, places, files, nullptr,
                     [&](const LogPlace& p, const char* row) { return fn(p.key, row); });
}

absl::Status LogRowStore::Snapshot(const std::string& dir) const {
  absl::MutexLock w(&write_mu_);
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    return absl::AlreadyExistsError(
        absl::StrCat(where(), ": snapshot directory ", dir, " exists (it must be a new one)"));
  }
  std::vector<std::shared_ptr<const LogSegmentFile>> files;
  {
    absl::ReaderMutexLock l(&mu_);
    if (head_unsynced_ && head_ != LogSegments::kNoSegment) {
      const LogSegmentFile& head = *segs_[head_].file;
      if (fdatasync(head.fd) != 0) return IoError(errno, "syncing", head.path);
    }
    for (uint32_t id = 0; id < segs_.ids(); ++id) {
      if (segs_[id].file != nullptr) files.push_back(segs_[id].file);
    }
  }
  head_unsynced_ = false;
  head_ = LogSegments::kNoSegment;  // sealed: the next batch starts a new segment
  return LinkLogSegments(where(), dir, files);
}

std::string LogRowStore::meta() const {
  absl::ReaderMutexLock l(&mu_);
  return meta_;
}

RowStoreStats LogRowStore::stats() const {
  absl::ReaderMutexLock l(&mu_);
  RowStoreStats st;
  st.rows = index_.rows();
  st.disk_bytes = segs_.DiskBytes();
  st.memory_bytes = sizeof(*this) + meta_.capacity() + segs_.MemoryBytes() + index_.bytes();
  return st;
}

}  // namespace ps
