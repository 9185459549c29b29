// LogAppender: appends one batch of records to the segments of a
// LogRowStore (server/store/log_row_store.h), and commits it or takes it
// back. Private to the log_row_store library.
//
// Records go into a buffer flushed with pwrite every megabyte. When the
// segment being appended to (the head) has no room for a record, the
// appender syncs it (fdatasync) and starts the next segment file: created,
// the directory synced, registered with the store, a header record
// written. Commit appends the commit record, flushes and fdatasyncs.
// Rollback deletes the segments the batch started and truncates the head
// back to where the batch started, so the files are as before it.
// Used by the store's one writer at a time; not thread-safe.
#ifndef PS_SERVER_STORE_LOG_APPENDER_H_
#define PS_SERVER_STORE_LOG_APPENDER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/store/log_segments.h"

namespace ps {

class LogAppender {
 public:
  // The segment table, as the store shares it (under its lock).
  class Registry {
   public:
    virtual ~Registry() = default;
    // Registers a new segment; its id. RESOURCE_EXHAUSTED when no id is left.
    virtual absl::StatusOr<uint32_t> Add(std::shared_ptr<const LogSegmentFile> file) = 0;
    virtual void Remove(uint32_t id) = 0;
  };
  struct Log {
    std::string who;  // names the store in errors
    std::string dir;
    int dir_fd = -1;
    size_t unit = 0;
    uint32_t units_per_segment = 0;
    uint32_t row_bytes = 0;
  };
  // The segment appended to: id kNoSegment when a new one is to start.
  struct Head {
    uint32_t id = LogSegments::kNoSegment;
    std::shared_ptr<const LogSegmentFile> file;  // opened for writing
    uint64_t units = 0;
  };

  // Starts a batch at `head`; new segments take their numbers from
  // *next_seq. Log, registry and next_seq outlive the appender.
  LogAppender(const Log& log, Registry* registry, Head head, uint32_t* next_seq);

  // Appends a record; *place (when not null): where it went. Errors: the
  // OS's (naming the file and errno), RESOURCE_EXHAUSTED from Registry::Add.
  absl::Status Append(uint8_t kind, uint32_t a, uint64_t b, const char* payload, size_t bytes,
                      uint32_t* place = nullptr);
  // Starts a new segment even when the head has room.
  absl::Status StartSegment();
  // Appends the commit record and, with `sync`, makes the batch durable
  // (with every unsynced one before it: they are in the head).
  absl::Status Commit(const std::string& meta, bool sync = true);
  // Takes an uncommitted batch back; empty, or what could not be undone.
  std::string Rollback();

  uint32_t records() const { return records_; }
  // The segment the last record went to, and its seq.
  uint32_t segment() const { return head_.id; }
  uint32_t seq() const { return head_.file == nullptr ? 0 : head_.file->seq; }
  // After Commit: the head, and the committed units of each segment the
  // batch wrote to.
  const Head& head() const { return head_; }
  const std::vector<std::pair<uint32_t, uint64_t>>& sizes() const { return sizes_; }

 private:
  absl::Status Roll(uint32_t units, bool force);
  absl::Status Flush();
  absl::Status IoError(int err, const std::string& what, const std::string& path) const;

  const Log& log_;
  Registry* const registry_;
  uint32_t* const next_seq_;
  const Head start_;
  Head head_;
  uint64_t flushed_ = 0;  // units of the head in its file; head_.units counts buf_ too
  std::string buf_;
  std::vector<std::pair<uint32_t, std::string>> created_;  // segments it started, paths
  std::vector<std::pair<uint32_t, uint64_t>> sizes_;       // segments it ended in, units
  uint32_t records_ = 0;                                   // of the batch
  uint32_t crc_ = 0;                                       // CRC-32C of their crcs
};

}  // namespace ps

#endif  // PS_SERVER_STORE_LOG_APPENDER_H_
