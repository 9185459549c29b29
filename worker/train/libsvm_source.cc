#include "worker/train/libsvm_source.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ps {
namespace libsvm_internal {

namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// A file descriptor closed on destruction.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// read(2) until n bytes or the end, retrying on EINTR; INTERNAL on error.
absl::StatusOr<size_t> ReadFd(int fd, const std::string& path, char* buf, size_t n) {
  for (;;) {
    const ssize_t got = read(fd, buf, n);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno == EINTR) continue;
    const int err = errno;
    if (err == EISDIR) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": is a directory; expected a LibSVM file"));
    }
    return absl::InternalError(absl::StrCat(path, ": read failed (", ErrnoText(err), ")"));
  }
}

// A plain file: the bytes peeked at by Open, then the rest of the file.
class PlainSource final : public ByteSource {
 public:
  PlainSource(std::string path, std::unique_ptr<Fd> fd, std::string peeked)
      : path_(std::move(path)), fd_(std::move(fd)), peeked_(std::move(peeked)) {}

  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    if (peeked_pos_ < peeked_.size()) {
      const size_t take = std::min(n, peeked_.size() - peeked_pos_);
      std::memcpy(buf, peeked_.data() + peeked_pos_, take);
      peeked_pos_ += take;
      return take;
    }
    return ReadFd(fd_->get(), path_, buf, n);
  }

 private:
  const std::string path_;
  std::unique_ptr<Fd> fd_;
  std::string peeked_;
  size_t peeked_pos_ = 0;
};

// A gzip file, inflated with zlib. Concatenated gzip members (as written by
// `cat a.gz b.gz` or pigz) are read one after another.
class GzipSource final : public ByteSource {
 public:
  GzipSource(std::string path, std::unique_ptr<Fd> fd, std::string peeked, size_t in_size)
      : path_(std::move(path)),
        fd_(std::move(fd)),
        in_(std::max(in_size, peeked.size())),
        compressed_read_(static_cast<int64_t>(peeked.size())) {
    std::memcpy(in_.data(), peeked.data(), peeked.size());
    stream_.next_in = reinterpret_cast<Bytef*>(in_.data());
    stream_.avail_in = static_cast<uInt>(peeked.size());
  }

  ~GzipSource() override {
    if (initialized_) inflateEnd(&stream_);
  }

  absl::Status Init() {
    // 15 + 16: the largest window, gzip wrapper only.
    const int rc = inflateInit2(&stream_, 15 + 16);
    if (rc != Z_OK) {
      return absl::InternalError(
          absl::StrCat(path_, ": cannot start gzip decompression (zlib error ", rc, ")"));
    }
    initialized_ = true;
    return absl::OkStatus();
  }

  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    // Caps the output of one call so avail_out fits zlib's 32-bit counter.
    n = std::min<size_t>(n, 1u << 30);
    stream_.next_out = reinterpret_cast<Bytef*>(buf);
    stream_.avail_out = static_cast<uInt>(n);
    while (stream_.avail_out == n) {
      if (stream_.avail_in == 0) {
        absl::StatusOr<size_t> got = ReadFd(fd_->get(), path_, in_.data(), in_.size());
        if (!got.ok()) return got.status();
        if (*got == 0) {
          if (member_done_) return 0;
          return absl::DataLossError(absl::StrCat(
              path_, ": truncated gzip stream: the file ends after ", compressed_read_,
              " compressed bytes in the middle of a gzip member; was it copied completely?"));
        }
        compressed_read_ += *got;
        stream_.next_in = reinterpret_cast<Bytef*>(in_.data());
        stream_.avail_in = static_cast<uInt>(*got);
      }
      if (member_done_) {
        // More bytes after a complete member: the next member starts here.
        inflateReset(&stream_);
        member_done_ = false;
      }
      const int rc = inflate(&stream_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        member_done_ = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return absl::DataLossError(absl::StrCat(
            path_, ": corrupt gzip data near compressed byte ", compressed_read_ - stream_.avail_in,
            " (zlib: ", stream_.msg != nullptr ? stream_.msg : "error", " ", rc, ")"));
      }
    }
    return n - stream_.avail_out;
  }

 private:
  const std::string path_;
  std::unique_ptr<Fd> fd_;
  std::vector<char> in_;
  z_stream stream_{};
  bool initialized_ = false;
  bool member_done_ = false;
  int64_t compressed_read_;  // compressed bytes read from the file so far
};

constexpr unsigned char kGzipMagic0 = 0x1f;
constexpr unsigned char kGzipMagic1 = 0x8b;

}  // namespace

absl::StatusOr<std::unique_ptr<ByteSource>> OpenSource(const std::string& path, size_t block_size,
                                                       bool* is_gzip) {
  int raw;
  do {
    raw = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (raw < 0 && errno == EINTR);
  if (raw < 0) {
    const int err = errno;
    const std::string msg = absl::StrCat(path, ": cannot open (", ErrnoText(err), ")");
    if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(msg);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
    return absl::InternalError(msg);
  }
  auto fd = std::make_unique<Fd>(raw);
  // Peek with read() rather than pread() so that pipes work too; the peeked
  // bytes are handed to the source, which returns them first.
  std::string peeked(2, '\0');
  size_t have = 0;
  while (have < 2) {
    absl::StatusOr<size_t> got = ReadFd(fd->get(), path, &peeked[have], 2 - have);
    if (!got.ok()) return got.status();
    if (*got == 0) break;
    have += *got;
  }
  peeked.resize(have);
  *is_gzip = have == 2 && static_cast<unsigned char>(peeked[0]) == kGzipMagic0 &&
             static_cast<unsigned char>(peeked[1]) == kGzipMagic1;
  if (!*is_gzip) return std::make_unique<PlainSource>(path, std::move(fd), std::move(peeked));
  auto gzip = std::make_unique<GzipSource>(path, std::move(fd), std::move(peeked), block_size);
  absl::Status s = gzip->Init();
  if (!s.ok()) return s;
  return std::unique_ptr<ByteSource>(std::move(gzip));
}

}  // namespace libsvm_internal
}  // namespace ps
