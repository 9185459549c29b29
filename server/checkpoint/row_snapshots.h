// Tiered tables' rows in full checkpoints, kept as snapshots of their row
// stores (proto RowStoreSnapshot in proto/checkpoint.proto): a server's
// store links its segment files into the checkpoint (RowStore::Snapshot)
// instead of reading every row and writing it again, and readers open the
// snapshot as a store of its own, read-only.
#ifndef PS_SERVER_CHECKPOINT_ROW_SNAPSHOTS_H_
#define PS_SERVER_CHECKPOINT_ROW_SNAPSHOTS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/checkpoint.pb.h"
#include "server/store/row_store.h"

namespace ps {

// After a store wrote a snapshot into snapshot->dir(), a directory
// directly in the checkpoint's `dir`: sets its dir relative to `dir` and
// lists its files with their sizes. Errors: INTERNAL naming a directory
// outside `dir`; the OS's, naming the path.
absl::Status DescribeRowSnapshot(const std::string& dir, proto::RowStoreSnapshot* snapshot);

// Checks the snapshot of the checkpoint at `dir` as OpenRowSnapshot does,
// reading its log without opening a store (no index built): a
// checkpoint's verification. DATA_LOSS as OpenRowSnapshot's.
absl::Status CheckRowSnapshot(const std::string& dir, const proto::RowStoreSnapshot& snapshot);

// The snapshot of the checkpoint at `dir`, opened read-only, once its
// files are exactly those listed with their sizes (its replay then checks
// every record's CRC-32C and every batch). DATA_LOSS naming the snapshot's
// directory and what is wrong: a name that is not a plain one, a row
// layout that does not add up, a file missing, extra or of another size,
// a damaged record.
absl::StatusOr<std::unique_ptr<RowStore>> OpenRowSnapshot(const std::string& dir,
                                                          const proto::RowStoreSnapshot& snapshot);

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_ROW_SNAPSHOTS_H_
