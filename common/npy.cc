#include "common/npy.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the .npy and .zip writers copy host-order numbers as little-endian");

namespace ps {
namespace npy_internal {

// A file written under "<path>.tmp", renamed to `path` by Commit; removed
// when destroyed before that.
class OutputFile {
 public:
  static absl::StatusOr<std::unique_ptr<OutputFile>> Create(const std::string& path) {
    const std::string tmp = path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return SystemError("creating", tmp);
    return std::unique_ptr<OutputFile>(new OutputFile(path, tmp, fd));
  }

  ~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }

  absl::Status Write(absl::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return SystemError("writing", tmp_);
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }

  absl::Status Commit() {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return SystemError("closing", tmp_);
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
      return SystemError("renaming to " + path_ + ":", tmp_);
    }
    committed_ = true;
    return absl::OkStatus();
  }

  const std::string& path() const { return path_; }

 private:
  OutputFile(std::string path, std::string tmp, int fd)
      : path_(std::move(path)), tmp_(std::move(tmp)), fd_(fd) {}

  static absl::Status SystemError(absl::string_view what, const std::string& path) {
    const int err = errno;
    return absl::Status(err == ENOENT ? absl::StatusCode::kNotFound : absl::StatusCode::kInternal,
                        absl::StrCat(what, " ", path, ": ", std::strerror(err)));
  }

  const std::string path_, tmp_;
  int fd_;
  bool committed_ = false;
};

}  // namespace npy_internal

namespace {

using npy_internal::OutputFile;

// ZIP fields are 16 and 32 bits wide; 0xffffffff means "see ZIP64".
constexpr uint64_t kZipLimit = 0xffffffffu;
// 1980-01-01 00:00 (the earliest MS-DOS date): archives are reproducible.
constexpr uint16_t kDosDate = (1 << 5) | 1;
constexpr uint16_t kDosTime = 0;
constexpr uint16_t kZipVersion = 20;             // 2.0: stored members, directories
constexpr uint16_t kMadeByUnix = (3 << 8) | 20;  // so unzip gives the members mode 0644
constexpr uint16_t kUtf8Names = 1 << 11;

void Put16(uint16_t v, std::string* out) {
  out->push_back(static_cast<char>(v & 0xff));
  out->push_back(static_cast<char>(v >> 8));
}

void Put32(uint32_t v, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

size_t ElementBytes(NpyType type) { return type == NpyType::kFloat32 ? 4 : 8; }

const char* Descr(NpyType type) { return type == NpyType::kFloat32 ? "<f4" : "<u8"; }

// zlib's crc32 takes 32-bit lengths: big arrays go in pieces.
uint32_t Crc32(uint32_t crc, absl::string_view bytes) {
  constexpr size_t kPiece = size_t{1} << 30;
  while (!bytes.empty()) {
    const size_t n = std::min(bytes.size(), kPiece);
    crc = static_cast<uint32_t>(
        ::crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(n)));
    bytes.remove_prefix(n);
  }
  return crc;
}

}  // namespace

NpyArray NpyArray::Float32(absl::Span<const float> values, std::vector<uint64_t> shape) {
  return {NpyType::kFloat32, std::move(shape),
          absl::string_view(reinterpret_cast<const char*>(values.data()), values.size() * 4)};
}

NpyArray NpyArray::Uint64(absl::Span<const uint64_t> values, std::vector<uint64_t> shape) {
  return {NpyType::kUint64, std::move(shape),
          absl::string_view(reinterpret_cast<const char*>(values.data()), values.size() * 8)};
}

absl::StatusOr<std::string> NpyHeader(const NpyArray& array) {
  const std::string shape_text = absl::StrJoin(array.shape, ", ");
  unsigned __int128 bytes = ElementBytes(array.type);
  for (uint64_t d : array.shape) {
    bytes *= d;
    if (bytes > ~uint64_t{0}) {
      return absl::InvalidArgumentError(
          absl::StrCat("array of shape (", shape_text, ") has more bytes than fit in 64 bits"));
    }
  }
  if (bytes != array.bytes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("array of shape (", shape_text, ") and dtype ", Descr(array.type), " needs ",
                     static_cast<uint64_t>(bytes), " bytes, got ", array.bytes.size()));
  }
  // A 1-tuple needs its trailing comma: (5,).
  std::string dict =
      absl::StrCat("{'descr': '", Descr(array.type), "', 'fortran_order': False, 'shape': (",
                   shape_text, array.shape.size() == 1 ? ",), }" : "), }");
  // magic (6) + version (2) + length (2) + dict + padding + '\n' = 64 * k.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  if (dict.size() > 0xffff) {
    return absl::InvalidArgumentError(
        absl::StrCat("array of ", array.shape.size(),
                     " dimensions: its header is over 65535 bytes, too long for .npy version 1.0"));
  }
  std::string header("\x93NUMPY\x01\x00", 8);
  Put16(static_cast<uint16_t>(dict.size()), &header);
  header += dict;
  return header;
}

absl::StatusOr<uint64_t> WriteNpy(const std::string& path, const NpyArray& array) {
  absl::StatusOr<std::string> header = NpyHeader(array);
  if (!header.ok()) {
    return absl::Status(header.status().code(),
                        absl::StrCat(path, ": ", header.status().message()));
  }
  absl::StatusOr<std::unique_ptr<OutputFile>> file = OutputFile::Create(path);
  if (!file.ok()) return file.status();
  if (absl::Status s = (*file)->Write(*header); !s.ok()) return s;
  if (absl::Status s = (*file)->Write(array.bytes); !s.ok()) return s;
  if (absl::Status s = (*file)->Commit(); !s.ok()) return s;
  return header->size() + array.bytes.size();
}

NpzWriter::NpzWriter(std::unique_ptr<OutputFile> file) : file_(std::move(file)) {}

NpzWriter::~NpzWriter() = default;

absl::StatusOr<std::unique_ptr<NpzWriter>> NpzWriter::Create(const std::string& path) {
  absl::StatusOr<std::unique_ptr<OutputFile>> file = OutputFile::Create(path);
  if (!file.ok()) return file.status();
  return std::unique_ptr<NpzWriter>(new NpzWriter(*std::move(file)));
}

absl::Status NpzWriter::Add(const std::string& name, const NpyArray& array) {
  const std::string& path = file_->path();
  const std::string member = name + ".npy";
  if (name.empty() || member.size() > 0xffff || members_.size() >= 0xffff) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": member name '", name, "' is empty or too long, or too many members"));
  }
  for (const Member& m : members_) {
    if (m.name == member) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": member '", name, "' added twice"));
    }
  }
  absl::StatusOr<std::string> header = NpyHeader(array);
  if (!header.ok()) {
    return absl::Status(header.status().code(),
                        absl::StrCat(path, " member '", name, "': ", header.status().message()));
  }
  const uint64_t bytes = header->size() + array.bytes.size();
  const uint64_t end = offset_ + 30 + member.size() + bytes;
  if (end >= kZipLimit) {
    return absl::OutOfRangeError(absl::StrCat(
        path, ": member '", name, "' (", bytes, " bytes) would take the archive to ", end,
        " bytes; without ZIP64 an .npz stays under 4 GiB (export fewer or smaller tables)"));
  }
  const uint32_t crc = Crc32(Crc32(0, *header), array.bytes);
  std::string local;
  Put32(0x04034b50, &local);
  Put16(kZipVersion, &local);
  Put16(kUtf8Names, &local);
  Put16(0, &local);  // stored
  Put16(kDosTime, &local);
  Put16(kDosDate, &local);
  Put32(crc, &local);
  Put32(static_cast<uint32_t>(bytes), &local);  // compressed size
  Put32(static_cast<uint32_t>(bytes), &local);  // uncompressed size
  Put16(static_cast<uint16_t>(member.size()), &local);
  Put16(0, &local);  // extra field length
  local += member;
  local += *header;
  if (absl::Status s = file_->Write(local); !s.ok()) return s;
  if (absl::Status s = file_->Write(array.bytes); !s.ok()) return s;
  members_.push_back({member, crc, static_cast<uint32_t>(bytes), static_cast<uint32_t>(offset_)});
  offset_ = end;
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> NpzWriter::Finish() {
  std::string directory;
  for (const Member& m : members_) {
    Put32(0x02014b50, &directory);
    Put16(kMadeByUnix, &directory);
    Put16(kZipVersion, &directory);
    Put16(kUtf8Names, &directory);
    Put16(0, &directory);  // stored
    Put16(kDosTime, &directory);
    Put16(kDosDate, &directory);
    Put32(m.crc32, &directory);
    Put32(m.bytes, &directory);
    Put32(m.bytes, &directory);
    Put16(static_cast<uint16_t>(m.name.size()), &directory);
    Put16(0, &directory);               // extra field length
    Put16(0, &directory);               // comment length
    Put16(0, &directory);               // disk number
    Put16(0, &directory);               // internal attributes
    Put32(0100644u << 16, &directory);  // external attributes: a regular file, rw-r--r--
    Put32(m.offset, &directory);
    directory += m.name;
  }
  // Each member's name was checked against the limit with its data; the
  // directory (46 bytes + name per member) must fit as well.
  if (offset_ + directory.size() + 22 >= kZipLimit) {
    return absl::OutOfRangeError(
        absl::StrCat(file_->path(), ": the archive would reach 4 GiB, which needs ZIP64"));
  }
  std::string end;
  Put32(0x06054b50, &end);
  Put16(0, &end);  // this disk
  Put16(0, &end);  // disk of the directory
  Put16(static_cast<uint16_t>(members_.size()), &end);
  Put16(static_cast<uint16_t>(members_.size()), &end);
  Put32(static_cast<uint32_t>(directory.size()), &end);
  Put32(static_cast<uint32_t>(offset_), &end);
  Put16(0, &end);  // comment length
  if (absl::Status s = file_->Write(directory); !s.ok()) return s;
  if (absl::Status s = file_->Write(end); !s.ok()) return s;
  if (absl::Status s = file_->Commit(); !s.ok()) return s;
  return offset_ + directory.size() + end.size();
}

}  // namespace ps
