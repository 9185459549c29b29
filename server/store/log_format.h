// The on-disk format of LogRowStore (server/store/log_row_store.h): its
// records, and the few file calls it makes (each returning 0 or an errno).
// Private to the log_row_store library; stateless, thread-safe.
//
// A segment file is a sequence of units of unit = kHeaderBytes + row_bytes
// bytes. Every record is a whole number of units: a Header, its payload,
// zeros to the end of its last unit. Header.crc covers everything after it,
// through the padding.
//   kSegmentHeader  1 unit, first in every file: a = row_bytes, b = kMagic.
//                   (kMagicV1: format 1, whose checksums were zlib's
//                   crc32; this build refuses it, saying so.)
//   kRow            1 unit: a = slice, b = key, payload the row.
//   kErase          a = number of erased keys, payload kEntryBytes each:
//                   slice (4), killed seq (4), key (8).
//   kDrop           1 unit: a = the dropped slice, b = its killed seq.
//   kCommit         ends a batch: a = meta bytes, payload the meta,
//                   b = records of the batch in this segment << 32 |
//                   the crc of their crcs. (A batch fills a segment and
//                   syncs it before it goes on in the next, so a torn
//                   batch is torn in its last segment; and compaction may
//                   delete the first segments of a batch.)
// Integers are little-endian (the host's order; the store runs on x86-64
// and aarch64 Linux).
#ifndef PS_SERVER_STORE_LOG_FORMAT_H_
#define PS_SERVER_STORE_LOG_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ps::row_log {

enum Kind : uint8_t { kSegmentHeader = 1, kRow = 2, kErase = 3, kDrop = 4, kCommit = 5 };
constexpr uint64_t kMagic = 0x3253524c474f4c50;    // "PLOGLRS2": CRC-32C
constexpr uint64_t kMagicV1 = 0x3153524c474f4c50;  // "PLOGLRS1": zlib's crc32
constexpr size_t kHeaderBytes = 20;
constexpr size_t kEntryBytes = 16;

struct Header {
  uint32_t crc;         // CRC-32C of the record's bytes after this field
  uint32_t kind_units;  // kind | units << 8
  uint32_t a;
  uint64_t b;
} __attribute__((packed));
static_assert(sizeof(Header) == kHeaderBytes, "headers are packed");

struct Record {
  uint8_t kind = 0;
  uint32_t units = 0;
  uint32_t a = 0;
  uint64_t b = 0;
};

// CRC-32C (common/crc32c.h), continuing crc.
uint32_t Crc(const char* p, size_t n, uint32_t crc = 0);

// Appends a record of `units` units to *buf; returns its crc.
uint32_t PutRecord(std::string* buf, size_t unit, uint8_t kind, uint32_t units, uint32_t a,
                   uint64_t b, const char* payload, size_t bytes);

// Appends an erase entry to *entries, and reads one back.
void PutEntry(std::string* entries, uint32_t slice, uint32_t killed_seq, uint64_t key);
void GetEntry(const char* p, uint32_t* slice, uint32_t* killed_seq, uint64_t* key);

// Checks the record at p, with `avail` bytes of the file from p on: empty
// when it is whole and its checksum matches (*r then holds its fields),
// else what is wrong with it.
std::string ParseRecord(const char* p, size_t avail, size_t unit, Record* r);

// seg-%08u.log, and back (false for other names).
std::string SegmentName(uint32_t seq);
bool ParseSegmentName(absl::string_view name, uint32_t* seq);

// pwrite of all n bytes.
int WriteAll(int fd, const char* p, size_t n, uint64_t off);
// pread of up to n bytes; *got: fewer at the end of the file.
int ReadAll(int fd, char* p, size_t n, uint64_t off, size_t* got);
// mkdir -p.
int MakeDirs(const std::string& path);
// fsync of a directory (after files in it were created or deleted).
int SyncDir(const std::string& dir);
// Copies the open file `from` to the new file `to`, synced.
int CopyFile(int from, const std::string& to);
// The status of the OS's error `err` while doing `what` to `path`:
// "<who>: <what> <path>: <strerror> (errno N)".
absl::Status OsError(absl::string_view who, int err, absl::string_view what,
                     absl::string_view path);

}  // namespace ps::row_log

#endif  // PS_SERVER_STORE_LOG_FORMAT_H_
