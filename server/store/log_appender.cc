#include "server/store/log_appender.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/store/log_format.h"

namespace ps {
namespace {

constexpr size_t kFlushBytes = size_t{1} << 20;

}  // namespace

LogAppender::LogAppender(const Log& log, Registry* registry, Head head, uint32_t* next_seq)
    : log_(log), registry_(registry), next_seq_(next_seq), start_(head), head_(std::move(head)) {
  flushed_ = head_.units;
}

absl::Status LogAppender::IoError(int err, const std::string& what, const std::string& path) const {
  return row_log::OsError(log_.who, err, what, path);
}

absl::Status LogAppender::Append(uint8_t kind, uint32_t a, uint64_t b, const char* payload,
                                 size_t bytes, uint32_t* place) {
  const uint64_t units = (row_log::kHeaderBytes + bytes + log_.unit - 1) / log_.unit;
  if (units >= log_.units_per_segment) {
    return absl::InternalError(absl::StrCat(log_.who, ": a record of ", units, " units"));
  }
  if (absl::Status s = Roll(static_cast<uint32_t>(units), false); !s.ok()) return s;
  if (place != nullptr) {
    *place = static_cast<uint32_t>(head_.id * uint64_t{log_.units_per_segment} + head_.units);
  }
  const uint32_t crc = row_log::PutRecord(&buf_, log_.unit, kind, static_cast<uint32_t>(units), a,
                                          b, payload, bytes);
  head_.units += units;
  if (kind != row_log::kCommit) {
    ++records_;
    crc_ = row_log::Crc(reinterpret_cast<const char*>(&crc), sizeof crc, crc_);
  }
  return buf_.size() >= kFlushBytes ? Flush() : absl::OkStatus();
}

absl::Status LogAppender::StartSegment() { return Roll(1, true); }

absl::Status LogAppender::Roll(uint32_t units, bool force) {
  if (!force && head_.file != nullptr && head_.units + units <= log_.units_per_segment) {
    return absl::OkStatus();
  }
  if (head_.file != nullptr) {
    // Synced before the next starts: damage is only ever in the last one.
    if (absl::Status s = Flush(); !s.ok()) return s;
    if (fdatasync(head_.file->fd) != 0) return IoError(errno, "syncing", head_.file->path);
    sizes_.emplace_back(head_.id, head_.units);
  }
  const uint32_t seq = (*next_seq_)++;
  const std::string path = log_.dir + "/" + row_log::SegmentName(seq);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(errno, "creating", path);
  auto file = std::make_shared<const LogSegmentFile>(fd, seq, path,
                                                     size_t{log_.units_per_segment} * log_.unit);
  absl::StatusOr<uint32_t> id = registry_->Add(file);
  if (!id.ok()) {
    unlink(path.c_str());
    return id.status();
  }
  created_.emplace_back(*id, path);
  head_ = Head{*id, std::move(file), 1};
  flushed_ = 0;
  records_ = crc_ = 0;  // a commit counts the records in its segment
  if (fsync(log_.dir_fd) != 0) return IoError(errno, "syncing directory", log_.dir);
  row_log::PutRecord(&buf_, log_.unit, row_log::kSegmentHeader, 1, log_.row_bytes, row_log::kMagic,
                     nullptr, 0);
  return absl::OkStatus();
}

absl::Status LogAppender::Flush() {
  if (buf_.empty()) return absl::OkStatus();
  const uint64_t off = flushed_ * log_.unit;
  if (int err = row_log::WriteAll(head_.file->fd, buf_.data(), buf_.size(), off)) {
    return IoError(err, absl::StrCat("writing ", buf_.size(), " bytes at offset ", off, " of"),
                   head_.file->path);
  }
  flushed_ += buf_.size() / log_.unit;
  buf_.clear();
  return absl::OkStatus();
}

absl::Status LogAppender::Commit(const std::string& meta, bool sync) {
  // The segment the commit goes to first: it counts the records there.
  const uint64_t units = (row_log::kHeaderBytes + meta.size() + log_.unit - 1) / log_.unit;
  if (units >= log_.units_per_segment) {
    return absl::InternalError(absl::StrCat(log_.who, ": a meta of ", meta.size(), " bytes"));
  }
  if (absl::Status s = Roll(static_cast<uint32_t>(units), false); !s.ok()) return s;
  const uint64_t count = uint64_t{records_} << 32 | crc_;
  absl::Status s =
      Append(row_log::kCommit, static_cast<uint32_t>(meta.size()), count, meta.data(), meta.size());
  if (s.ok()) s = Flush();
  if (s.ok() && sync && fdatasync(head_.file->fd) != 0) {
    s = IoError(errno, "syncing", head_.file->path);
  }
  if (s.ok()) sizes_.emplace_back(head_.id, head_.units);
  return s;
}

std::string LogAppender::Rollback() {
  std::string failed;
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
    registry_->Remove(it->first);
    if (unlink(it->second.c_str()) != 0) {
      failed = absl::StrCat("deleting ", it->second, ": ", std::strerror(errno));
    }
  }
  if (start_.file != nullptr &&
      (ftruncate(start_.file->fd, static_cast<off_t>(start_.units * log_.unit)) != 0 ||
       fdatasync(start_.file->fd) != 0)) {
    failed = absl::StrCat("truncating ", start_.file->path, ": ", std::strerror(errno));
  }
  if (fsync(log_.dir_fd) != 0) {
    failed = absl::StrCat("syncing ", log_.dir, ": ", std::strerror(errno));
  }
  head_ = start_;
  return failed;
}

}  // namespace ps
