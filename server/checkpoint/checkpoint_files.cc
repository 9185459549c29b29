#include "server/checkpoint/checkpoint_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/durable_file.h"
#include "server/checkpoint/row_snapshots.h"

namespace ps {
namespace {

constexpr char kManifestMagic[4] = {'P', 'S', 'C', 'K'};
constexpr size_t kManifestHeader = 16;  // magic, CRC32, 8-byte length
constexpr size_t kWriteBuffer = 1 << 20;

uint32_t Crc(uint32_t crc, absl::string_view bytes) {
  // zlib takes lengths as uInt: feed very large pieces in parts.
  while (!bytes.empty()) {
    const size_t n = std::min<size_t>(bytes.size(), 1u << 30);
    crc = static_cast<uint32_t>(
        crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(n)));
    bytes.remove_prefix(n);
  }
  return crc;
}

absl::Status MakeDirs(const std::string& dir) {
  std::string prefix;
  for (absl::string_view part : absl::StrSplit(dir, '/')) {
    if (prefix.empty() && part.empty()) {
      prefix = "/";
      continue;
    }
    if (part.empty()) continue;
    absl::StrAppend(&prefix, prefix.empty() || prefix == "/" ? "" : "/", part);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError("cannot create directory", prefix);
    }
  }
  return absl::OkStatus();
}

absl::Status RemoveTree(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return ErrnoError("cannot open directory", path);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  for (const std::string& name : names) {
    const std::string child = absl::StrCat(path, "/", name);
    struct stat st;
    if (::lstat(child.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {  // a row store snapshot
      if (absl::Status s = RemoveTree(child); !s.ok()) return s;
    } else if (::unlink(child.c_str()) != 0) {
      return ErrnoError("cannot remove", child);
    }
  }
  if (::rmdir(path.c_str()) != 0) return ErrnoError("cannot remove directory", path);
  return absl::OkStatus();
}

}  // namespace

std::string CheckpointDirName(uint64_t sequence) { return absl::StrFormat("ckpt-%010d", sequence); }

bool ParseCheckpointDirName(absl::string_view name, uint64_t* sequence) {
  if (!absl::ConsumePrefix(&name, "ckpt-") || name.size() < 10) return false;
  for (char c : name) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(name, sequence);
}

CheckpointFileWriter::CheckpointFileWriter(std::string dir, std::string name, uint64_t block_bytes,
                                           int fd)
    : dir_(std::move(dir)), name_(std::move(name)), block_bytes_(block_bytes), fd_(fd) {
  entry_.set_name(name_);
  entry_.set_block_bytes(block_bytes_);
  block_crc_ = Crc(0, "");
}

absl::StatusOr<std::unique_ptr<CheckpointFileWriter>> CheckpointFileWriter::Create(
    const std::string& dir, const std::string& name, uint64_t block_bytes) {
  if (name.empty() || absl::StrContains(name, '/') || absl::EndsWith(name, ".tmp") ||
      name == kManifestName) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint file name '", name,
                     "' must be non-empty, without '/', not end in .tmp "
                     "and not be ",
                     kManifestName));
  }
  if (block_bytes == 0) return absl::InvalidArgumentError("checkpoint block_bytes must be > 0");
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  const std::string tmp = absl::StrCat(dir, "/", name, ".tmp");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create", tmp);
  return std::unique_ptr<CheckpointFileWriter>(
      new CheckpointFileWriter(dir, name, block_bytes, fd));
}

CheckpointFileWriter::~CheckpointFileWriter() {
  if (finished_) return;
  ::close(fd_);
  ::unlink(absl::StrCat(dir_, "/", name_, ".tmp").c_str());
}

absl::Status CheckpointFileWriter::Append(absl::string_view bytes) {
  entry_.set_bytes(entry_.bytes() + bytes.size());
  // Block CRCs as the bytes go by.
  absl::string_view rest = bytes;
  while (!rest.empty()) {
    const size_t n = std::min<uint64_t>(rest.size(), block_bytes_ - block_fill_);
    block_crc_ = Crc(block_crc_, rest.substr(0, n));
    block_fill_ += n;
    rest.remove_prefix(n);
    if (block_fill_ == block_bytes_) {
      entry_.add_block_crc32(block_crc_);
      block_crc_ = Crc(0, "");
      block_fill_ = 0;
    }
  }
  buffer_.append(bytes.data(), bytes.size());
  if (buffer_.size() >= kWriteBuffer) return Flush();
  return absl::OkStatus();
}

absl::Status CheckpointFileWriter::Flush() {
  absl::Status s = WriteAll(fd_, buffer_, absl::StrCat(dir_, "/", name_, ".tmp"));
  buffer_.clear();
  return s;
}

absl::StatusOr<proto::CheckpointFile> CheckpointFileWriter::Finish() {
  const std::string tmp = absl::StrCat(dir_, "/", name_, ".tmp");
  if (absl::Status s = Flush(); !s.ok()) return s;
  if (block_fill_ > 0) entry_.add_block_crc32(block_crc_);
  if (::fsync(fd_) != 0) return ErrnoError("cannot fsync", tmp);
  ::close(fd_);
  finished_ = true;
  if (::rename(tmp.c_str(), absl::StrCat(dir_, "/", name_).c_str()) != 0) {
    absl::Status s = ErrnoError("cannot rename", tmp);
    ::unlink(tmp.c_str());
    return s;
  }
  if (absl::Status s = SyncDir(dir_); !s.ok()) return s;
  return entry_;
}

absl::Status CommitCheckpoint(const std::string& dir, const proto::CheckpointManifest& manifest) {
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  const std::string body = manifest.SerializeAsString();
  std::string bytes(kManifestHeader, '\0');
  std::memcpy(&bytes[0], kManifestMagic, 4);
  const uint32_t crc = Crc(Crc(0, ""), body);
  const uint64_t length = body.size();
  std::memcpy(&bytes[4], &crc, 4);
  std::memcpy(&bytes[8], &length, 8);
  bytes += body;
  return WriteFileDurably(dir, kManifestName, bytes);
}

absl::StatusOr<proto::CheckpointManifest> ReadManifest(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kManifestName);
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) return bytes.status();
  if (bytes->size() < kManifestHeader || std::memcmp(bytes->data(), kManifestMagic, 4) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": not a checkpoint manifest (", bytes->size(),
                                            " bytes, expected the magic PSCK and a header of ",
                                            kManifestHeader, " bytes)"));
  }
  uint32_t crc;
  uint64_t length;
  std::memcpy(&crc, bytes->data() + 4, 4);
  std::memcpy(&length, bytes->data() + 8, 8);
  const absl::string_view body = absl::string_view(*bytes).substr(kManifestHeader);
  if (body.size() != length) {
    return absl::DataLossError(absl::StrCat(path, ": ", body.size(),
                                            " bytes after the header, expected ", length,
                                            " (truncated or extended)"));
  }
  const uint32_t actual = Crc(Crc(0, ""), body);
  if (actual != crc) {
    return absl::DataLossError(
        absl::StrFormat("%s: CRC32 %08x, expected %08x (corrupt)", path, actual, crc));
  }
  proto::CheckpointManifest manifest;
  if (!manifest.ParseFromString(std::string(body))) {
    return absl::DataLossError(absl::StrCat(path, ": the manifest does not parse"));
  }
  return manifest;
}

absl::StatusOr<std::string> ReadCheckpointFile(const std::string& dir,
                                               const proto::CheckpointFile& entry) {
  const std::string path = absl::StrCat(dir, "/", entry.name());
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) {
    if (bytes.status().code() == absl::StatusCode::kNotFound) {
      return absl::DataLossError(
          absl::StrCat(path, ": missing (the manifest lists it, ", entry.bytes(), " bytes)"));
    }
    return bytes.status();
  }
  if (bytes->size() != entry.bytes()) {
    return absl::DataLossError(absl::StrCat(path, ": ", bytes->size(), " bytes, expected ",
                                            entry.bytes(), " (truncated or extended)"));
  }
  const uint64_t block = entry.block_bytes();
  const uint64_t blocks = block == 0 ? 0 : (entry.bytes() + block - 1) / block;
  if (block == 0 || static_cast<uint64_t>(entry.block_crc32_size()) != blocks) {
    return absl::DataLossError(absl::StrCat(path, ": the manifest has ", entry.block_crc32_size(),
                                            " block CRCs for ", entry.bytes(),
                                            " bytes in blocks of ", block));
  }
  for (uint64_t b = 0; b < blocks; ++b) {
    const absl::string_view piece = absl::string_view(*bytes).substr(b * block, block);
    const uint32_t actual = Crc(Crc(0, ""), piece);
    if (actual != entry.block_crc32(static_cast<int>(b))) {
      return absl::DataLossError(absl::StrFormat(
          "%s: block %d (bytes %d..%d) has CRC32 %08x, expected %08x (corrupt)", path, b, b * block,
          b * block + piece.size(), actual, entry.block_crc32(static_cast<int>(b))));
    }
  }
  return bytes;
}

absl::Status VerifyCheckpoint(const std::string& dir) {
  absl::StatusOr<proto::CheckpointManifest> manifest = ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  for (const proto::CheckpointFile& file : manifest->files()) {
    if (absl::Status s = ReadCheckpointFile(dir, file).status(); !s.ok()) return s;
  }
  for (const proto::RowStoreSnapshot& snapshot : manifest->row_snapshots()) {
    if (absl::Status s = CheckRowSnapshot(dir, snapshot); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CheckpointDir>> ListCheckpoints(const std::string& root) {
  std::vector<CheckpointDir> out;
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return out;
    return ErrnoError("cannot open checkpoint directory", root);
  }
  while (dirent* e = ::readdir(d)) {
    CheckpointDir c;
    if (!ParseCheckpointDirName(e->d_name, &c.sequence)) continue;
    c.path = absl::StrCat(root, "/", e->d_name);
    struct stat st;
    c.has_manifest = ::stat(absl::StrCat(c.path, "/", kManifestName).c_str(), &st) == 0;
    out.push_back(std::move(c));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(),
            [](const CheckpointDir& a, const CheckpointDir& b) { return a.sequence < b.sequence; });
  return out;
}

absl::StatusOr<FoundCheckpoint> FindNewestValidCheckpoint(const std::string& root,
                                                          std::vector<std::string>* skipped) {
  absl::StatusOr<std::vector<CheckpointDir>> dirs = ListCheckpoints(root);
  if (!dirs.ok()) return dirs.status();
  for (auto it = dirs->rbegin(); it != dirs->rend(); ++it) {
    const std::string name = CheckpointDirName(it->sequence);
    if (!it->has_manifest) {
      if (skipped != nullptr) skipped->push_back(absl::StrCat(name, ": incomplete (no MANIFEST)"));
      continue;
    }
    if (absl::Status s = VerifyCheckpoint(it->path); !s.ok()) {
      if (skipped != nullptr) skipped->push_back(absl::StrCat(name, ": ", s.message()));
      continue;
    }
    absl::StatusOr<proto::CheckpointManifest> manifest = ReadManifest(it->path);
    if (!manifest.ok()) continue;  // changed since it verified
    return FoundCheckpoint{it->path, *std::move(manifest)};
  }
  return absl::NotFoundError(absl::StrCat("no valid checkpoint under ", root));
}

absl::StatusOr<std::vector<std::string>> PruneCheckpoints(const std::string& root, int keep) {
  if (keep < 1) return absl::InvalidArgumentError(absl::StrCat("keep ", keep, " must be >= 1"));
  absl::StatusOr<std::vector<CheckpointDir>> dirs = ListCheckpoints(root);
  if (!dirs.ok()) return dirs.status();
  std::set<uint64_t> kept;
  uint64_t newest_complete = 0;
  int complete = 0;
  for (auto it = dirs->rbegin(); it != dirs->rend(); ++it) {
    if (!it->has_manifest) continue;
    newest_complete = std::max(newest_complete, it->sequence);
    if (complete++ >= keep) continue;
    // A kept checkpoint and the chain of bases it restores through.
    uint64_t sequence = it->sequence;
    while (sequence != 0 && kept.insert(sequence).second) {
      absl::StatusOr<proto::CheckpointManifest> m =
          ReadManifest(absl::StrCat(root, "/", CheckpointDirName(sequence)));
      sequence = m.ok() ? m->base_sequence() : 0;
    }
  }
  std::vector<std::string> removed;
  for (const CheckpointDir& c : *dirs) {
    const bool old_incomplete = !c.has_manifest && c.sequence < newest_complete;
    const bool old_complete = c.has_manifest && kept.count(c.sequence) == 0;
    if (!old_incomplete && !old_complete) continue;
    if (absl::Status s = RemoveTree(c.path); !s.ok()) return s;
    removed.push_back(c.path);
  }
  if (!removed.empty()) {
    if (absl::Status s = SyncDir(root); !s.ok()) return s;
  }
  return removed;
}

}  // namespace ps
