// Export of a checkpoint's tables to NumPy files, for analysis or serving
// outside the parameter server (ps_ckpt export). The checkpoint's chain (its
// full base, then each incremental one up to it) is applied in memory, and
// each table is written as
//   dense:  <out_dir>/<table>.npy  float32 [num_keys, width]
//   sparse: <out_dir>/<table>.npz  "keys" uint64 [n], ascending, and
//                                  "values" float32 [n, width], row i the
//                                  values of keys[i]
// Values only: optimizer state and row metadata are not exported. A '/' in a
// table name makes subdirectories: "mlp/fc0/w" -> <out_dir>/mlp/fc0/w.npy.
//
// Memory: the exported tables' values (a dense table's num_keys * width
// floats; a sparse table's rows, twice while it is sorted) and one data file
// of the checkpoint at a time. A plain function: thread-compatible.
#ifndef PS_SERVER_CHECKPOINT_CHECKPOINT_EXPORT_H_
#define PS_SERVER_CHECKPOINT_CHECKPOINT_EXPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ps.pb.h"

namespace ps {

// One file written by ExportCheckpoint.
struct ExportedTable {
  std::string table;
  bool sparse = false;
  std::string path;             // out_dir/<table>.npy or .npz
  std::vector<uint64_t> shape;  // of the values: {num_keys or n, width}
  uint64_t bytes = 0;           // of the file
};

// The file a table is exported to, relative to the output directory:
// "<name>.npy" for a dense table, "<name>.npz" for a sparse one. Each
// '/'-separated part of the name becomes a directory or the file's name, so
// a part may be neither empty nor start with '.' (no "..", no hidden
// files), and the name may not hold a NUL byte: INVALID_ARGUMENT naming the
// table otherwise.
absl::StatusOr<std::string> ExportFileName(const proto::TableDef& table);

// Exports the tables named in `tables` (every table of the checkpoint when
// empty) of the checkpoint at `dir`, a ckpt-<sequence> directory whose
// bases are beside it, into out_dir (created with its parents if missing;
// files of the same names are replaced). Returns the files written, in the
// order of the checkpoint's manifest.
//
// Every record is checked against the newest manifest's table definitions
// and the tables are written only once the whole chain has been applied, so
// on any error but a failed write no file is written. Errors:
//   NOT_FOUND         a table the checkpoint does not have (the message lists
//                     those it has); the checkpoint or a base missing;
//   INVALID_ARGUMENT  a table name that is not a safe file name
//                     (ExportFileName); an empty out_dir;
//   DATA_LOSS         naming the checkpoint, table and slice: a record whose
//                     kind or width differs from the table's, dense keys past
//                     num_keys or in no slice of the chain, a sparse key in a
//                     slice it does not hash to, twice in one record, or both
//                     written and erased by one record; and those of
//                     CheckpointChain and ForEachChainRecord (damaged files);
//   RESOURCE_EXHAUSTED  a dense table too large to hold in memory;
//   and the system's errors and the .npz size limit (4 GiB, OUT_OF_RANGE)
//   of the writes (common/npy.h), naming the file.
absl::StatusOr<std::vector<ExportedTable>> ExportCheckpoint(const std::string& dir,
                                                            const std::string& out_dir,
                                                            const std::vector<std::string>& tables);

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_CHECKPOINT_EXPORT_H_
