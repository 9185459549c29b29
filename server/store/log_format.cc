#include "server/store/log_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/crc32c.h"

namespace ps::row_log {

uint32_t Crc(const char* p, size_t n, uint32_t crc) { return Crc32c(p, n, crc); }

uint32_t PutRecord(std::string* buf, size_t unit, uint8_t kind, uint32_t units, uint32_t a,
                   uint64_t b, const char* payload, size_t bytes) {
  const size_t at = buf->size();
  buf->resize(at + units * unit);  // zeros
  char* p = &(*buf)[at];
  Header h{0, kind | units << 8, a, b};
  std::memcpy(p, &h, sizeof h);
  if (bytes > 0) std::memcpy(p + sizeof h, payload, bytes);
  h.crc = Crc(p + 4, units * unit - 4);
  std::memcpy(p, &h.crc, sizeof h.crc);
  return h.crc;
}

void PutEntry(std::string* entries, uint32_t slice, uint32_t killed_seq, uint64_t key) {
  char entry[kEntryBytes];
  std::memcpy(entry, &slice, 4);
  std::memcpy(entry + 4, &killed_seq, 4);
  std::memcpy(entry + 8, &key, 8);
  entries->append(entry, kEntryBytes);
}

void GetEntry(const char* p, uint32_t* slice, uint32_t* killed_seq, uint64_t* key) {
  std::memcpy(slice, p, 4);
  std::memcpy(killed_seq, p + 4, 4);
  std::memcpy(key, p + 8, 8);
}

std::string ParseRecord(const char* p, size_t avail, size_t unit, Record* r) {
  if (avail < unit) return "a partial record";
  Header h;
  std::memcpy(&h, p, sizeof h);
  r->kind = h.kind_units & 0xff, r->units = h.kind_units >> 8, r->a = h.a, r->b = h.b;
  if (r->kind < kSegmentHeader || r->kind > kCommit) return "an unknown record kind";
  if (r->units == 0 || r->units > avail / unit) return "a record longer than the file";
  const uint64_t room = r->units * unit - kHeaderBytes;
  if ((r->kind == kErase && r->a * kEntryBytes > room) || (r->kind == kCommit && r->a > room) ||
      (r->kind != kErase && r->kind != kCommit && r->units != 1)) {
    return "a record of the wrong size";
  }
  if (Crc(p + 4, r->units * unit - 4) != h.crc) return "a checksum mismatch";
  return "";
}

std::string SegmentName(uint32_t seq) { return absl::StrFormat("seg-%08u.log", seq); }

bool ParseSegmentName(absl::string_view name, uint32_t* seq) {
  if (!absl::ConsumePrefix(&name, "seg-") || !absl::ConsumeSuffix(&name, ".log") ||
      name.size() < 8) {
    return false;
  }
  for (char c : name) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(name, seq);
}

int WriteAll(int fd, const char* p, size_t n, uint64_t off) {
  while (n > 0) {
    const ssize_t w = pwrite(fd, p, n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : EIO;
    p += w, n -= static_cast<size_t>(w), off += static_cast<uint64_t>(w);
  }
  return 0;
}

int ReadAll(int fd, char* p, size_t n, uint64_t off, size_t* got) {
  for (*got = 0; *got < n;) {
    const ssize_t r = pread(fd, p + *got, n - *got, static_cast<off_t>(off + *got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno;
    if (r == 0) break;
    *got += static_cast<size_t>(r);
  }
  return 0;
}

int MakeDirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    if (mkdir(path.substr(0, i).c_str(), 0755) != 0 && errno != EEXIST) return errno;
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return errno;
  return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

int SyncDir(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int err = fsync(fd) == 0 ? 0 : errno;
  close(fd);
  return err;
}

int CopyFile(int from, const std::string& to) {
  const int fd = open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  std::string buf(size_t{1} << 20, '\0');
  int err = 0;
  size_t got = 1;
  for (uint64_t off = 0; err == 0 && got > 0; off += got) {
    err = ReadAll(from, buf.data(), buf.size(), off, &got);
    if (err == 0) err = WriteAll(fd, buf.data(), got, off);
  }
  if (err == 0 && fsync(fd) != 0) err = errno;
  close(fd);
  return err;
}

absl::Status OsError(absl::string_view who, int err, absl::string_view what,
                     absl::string_view path) {
  return absl::Status(
      absl::ErrnoToStatusCode(err),
      absl::StrCat(who, ": ", what, " ", path, ": ", std::strerror(err), " (errno ", err, ")"));
}

}  // namespace ps::row_log
