#include "common/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ps {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  const int err = errno;
  return absl::Status(err == ENOENT ? absl::StatusCode::kNotFound : absl::StatusCode::kInternal,
                      absl::StrCat(what, " ", path, ": ", std::strerror(err)));
}

absl::Status WriteAll(int fd, absl::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("cannot write", path);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open directory", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return ErrnoError("cannot fsync directory", dir);
  return absl::OkStatus();
}

absl::Status WriteFileDurably(const std::string& dir, const std::string& name,
                              absl::string_view bytes) {
  const std::string tmp = absl::StrCat(dir, "/", name, ".tmp");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create", tmp);
  absl::Status s = WriteAll(fd, bytes, tmp);
  if (s.ok() && ::fsync(fd) != 0) s = ErrnoError("cannot fsync", tmp);
  ::close(fd);
  if (s.ok() && ::rename(tmp.c_str(), absl::StrCat(dir, "/", name).c_str()) != 0) {
    s = ErrnoError("cannot rename", tmp);
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return SyncDir(dir);
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path);
  std::string out;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status s = ErrnoError("cannot read", path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace ps
