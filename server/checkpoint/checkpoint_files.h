// Checkpoint files on disk: the layout, the crash-safe write protocol, the
// checks on read, the search for the newest valid checkpoint and the pruning
// of old ones. What goes into a checkpoint (the consistent cut, the slices)
// is decided elsewhere; this layer stores and verifies bytes.
//
// Layout: ROOT/ckpt-<sequence, 10 digits>/ holds the data files and, once
// complete, MANIFEST (proto CheckpointManifest: the files with their sizes
// and a CRC32 per block, the tables, clocks and placement).
//
// Write protocol: every file is written under "<name>.tmp", fsynced,
// renamed to its name and the directory fsynced; MANIFEST is written the
// same way after every data file. A crash at any moment leaves either a
// complete checkpoint (MANIFEST present, every file as listed) or a
// directory without MANIFEST, which is never loaded: the previous checkpoint
// stays the newest valid one.
//
// Read checks: MANIFEST carries a magic, its length and a CRC32; each data
// file's size and every block's CRC32 are checked against MANIFEST. Errors
// are DATA_LOSS naming the file, the block, and what was expected and found.
//
// Thread-compatible: one writer per file; different checkpoints may be
// written and read concurrently.
#ifndef PS_SERVER_CHECKPOINT_CHECKPOINT_FILES_H_
#define PS_SERVER_CHECKPOINT_CHECKPOINT_FILES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/checkpoint.pb.h"

namespace ps {

constexpr uint64_t kCheckpointBlockBytes = uint64_t{1} << 20;
constexpr char kManifestName[] = "MANIFEST";

// "ckpt-0000000042"; and back (false for other names).
std::string CheckpointDirName(uint64_t sequence);
bool ParseCheckpointDirName(absl::string_view name, uint64_t* sequence);

// One data file of a checkpoint being written. Append as often as needed;
// Finish makes it durable under its name. Destroyed unfinished, it removes
// its temporary file.
class CheckpointFileWriter {
 public:
  // Creates dir (and its parents) if needed and opens dir/name.tmp.
  // Errors: INVALID_ARGUMENT for a name with '/' or ending in ".tmp";
  // the system's error naming the path.
  static absl::StatusOr<std::unique_ptr<CheckpointFileWriter>> Create(
      const std::string& dir, const std::string& name,
      uint64_t block_bytes = kCheckpointBlockBytes);
  ~CheckpointFileWriter();

  absl::Status Append(absl::string_view bytes);
  // Flushes, fsyncs, renames to the final name and fsyncs the directory.
  // Returns the file's entry for the manifest.
  absl::StatusOr<proto::CheckpointFile> Finish();

 private:
  CheckpointFileWriter(std::string dir, std::string name, uint64_t block_bytes, int fd);
  absl::Status Flush();

  const std::string dir_, name_;
  const uint64_t block_bytes_;
  int fd_;
  std::string buffer_;  // bytes not yet written
  proto::CheckpointFile entry_;
  uint64_t block_fill_ = 0;  // bytes of the current block so far
  uint32_t block_crc_ = 0;
  bool finished_ = false;
};

// Writes dir/MANIFEST by the write protocol: the checkpoint becomes valid.
absl::Status CommitCheckpoint(const std::string& dir, const proto::CheckpointManifest& manifest);

// Reads and checks dir/MANIFEST. Errors: NOT_FOUND when absent (an
// incomplete checkpoint), DATA_LOSS naming what is wrong.
absl::StatusOr<proto::CheckpointManifest> ReadManifest(const std::string& dir);

// Reads a data file and checks its size and every block against `entry`.
absl::StatusOr<std::string> ReadCheckpointFile(const std::string& dir,
                                               const proto::CheckpointFile& entry);

// Checks the manifest and every data file it lists (reading them all), and
// checks its row store snapshots (server/checkpoint/row_snapshots.h).
absl::Status VerifyCheckpoint(const std::string& dir);

struct CheckpointDir {
  uint64_t sequence = 0;
  std::string path;
  bool has_manifest = false;
};
// The checkpoint directories under root, oldest first. A missing root is
// empty, not an error.
absl::StatusOr<std::vector<CheckpointDir>> ListCheckpoints(const std::string& root);

struct FoundCheckpoint {
  std::string path;
  proto::CheckpointManifest manifest;
};
// The newest checkpoint under root that verifies. Each newer one that did
// not is described in *skipped ("ckpt-0000000007: <what was wrong>"; may
// be null). NOT_FOUND naming root when none does.
absl::StatusOr<FoundCheckpoint> FindNewestValidCheckpoint(const std::string& root,
                                                          std::vector<std::string>* skipped);

// Removes all but the newest `keep` (>= 1) complete checkpoints, keeping
// the base checkpoints the kept incremental ones are chained to, and every
// directory without a manifest that is older than the newest complete one
// (an interrupted write). Returns the paths removed.
absl::StatusOr<std::vector<std::string>> PruneCheckpoints(const std::string& root, int keep);

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_CHECKPOINT_FILES_H_
