// The slice records of checkpoint data files (format: proto SliceHeader in
// proto/checkpoint.proto): encoding, parsing with size checks, and the chain
// of checkpoints an incremental one is applied on. Used by the servers'
// checkpoints and restores and by ps_ckpt; knows nothing of tables in memory.
#ifndef PS_SERVER_CHECKPOINT_CHECKPOINT_RECORDS_H_
#define PS_SERVER_CHECKPOINT_CHECKPOINT_RECORDS_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/checkpoint.pb.h"
#include "server/checkpoint/checkpoint_files.h"

namespace ps {

// Bytes of the payload a header announces, or INVALID_ARGUMENT naming the
// table and slice when the header is inconsistent (width 0 or over
// floats_per_row, erased keys in a dense slice, sizes that overflow).
absl::StatusOr<uint64_t> SlicePayloadBytes(const proto::SliceHeader& header);

// Appends the record's length prefix and header to *out; the caller then
// appends exactly SlicePayloadBytes(header) bytes of payload.
void AppendSliceHeader(const proto::SliceHeader& header, std::string* out);

// One parsed record. The payload is not aligned: read it through these.
struct SliceRecord {
  proto::SliceHeader header;
  absl::string_view payload;

  // Sparse: the i-th key, and the i-th erased key.
  uint64_t Key(uint64_t i) const { return LoadU64(i * 8); }
  uint64_t ErasedKey(uint64_t i) const {
    return LoadU64(header.num_rows() * (8 + 4 * uint64_t{header.floats_per_row()}) + i * 8);
  }
  // Sparse: the i-th row (floats_per_row floats) into dst.
  void CopyRow(uint64_t i, float* dst) const {
    const uint64_t fpr = header.floats_per_row();
    std::memcpy(dst, payload.data() + header.num_rows() * 8 + i * fpr * 4, fpr * 4);
  }
  // Dense: `n` floats from float index `first` of the payload (values
  // first, then state) into dst.
  void CopyFloats(uint64_t first, uint64_t n, float* dst) const {
    std::memcpy(dst, payload.data() + first * 4, n * 4);
  }

 private:
  uint64_t LoadU64(uint64_t offset) const {
    uint64_t v;
    std::memcpy(&v, payload.data() + offset, 8);
    return v;
  }
};

// Calls fn for each record of a data file's bytes, in order. Stops at fn's
// first error and returns it. DATA_LOSS naming `file` and the byte offset
// when a length, header or payload runs past the end or a header does not
// parse or is inconsistent.
absl::Status ForEachSliceRecord(absl::string_view bytes, absl::string_view file,
                                absl::FunctionRef<absl::Status(const SliceRecord&)> fn);

// The checkpoints to apply, in order, to restore the one at `dir`: the full
// checkpoint it is chained to first, `dir` last (just `dir` when it is
// full). Each manifest is read and checked; NOT_FOUND or DATA_LOSS naming
// the base that is missing or damaged.
absl::StatusOr<std::vector<FoundCheckpoint>> CheckpointChain(const std::string& dir);

// The chain (as CheckpointChain) of the newest checkpoint under root whose
// every checkpoint verifies (VerifyCheckpoint: manifest, sizes, every
// block's CRC), so that a restore never stops halfway through a damaged
// base. Each newer checkpoint passed over is described in *skipped
// ("ckpt-0000000007: <what was wrong>"; may be null). NOT_FOUND naming root
// when none is valid.
absl::StatusOr<std::vector<FoundCheckpoint>> FindNewestValidChain(
    const std::string& root, std::vector<std::string>* skipped);

// Calls fn(record) for every bucket of a row store snapshot of the
// checkpoint at `dir` (server/checkpoint/row_snapshots.h): its rows as
// records of about kSnapshotRecordBytes of rows each, the first without
// `delta` (it replaces the bucket, an empty one too), the others with.
// Errors: OpenRowSnapshot's, the store's, fn's.
constexpr size_t kSnapshotRecordBytes = size_t{16} << 20;
absl::Status ForEachRowSnapshotRecord(const std::string& dir,
                                      const proto::RowStoreSnapshot& snapshot,
                                      absl::FunctionRef<absl::Status(const SliceRecord&)> fn);

// Calls fn(checkpoint, record) for every record of the chain, oldest
// checkpoint first: each checkpoint's row store snapshots' records
// (ForEachRowSnapshotRecord), then every record of its data files; each
// file is read and its size and CRCs checked (ReadCheckpointFile) before
// any of its records is passed on.
absl::Status ForEachChainRecord(
    const std::vector<FoundCheckpoint>& chain,
    absl::FunctionRef<absl::Status(const FoundCheckpoint&, const SliceRecord&)> fn);

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_CHECKPOINT_RECORDS_H_
