// Writes gzip-compressed IDX files (the format idx_reader.h reads), so tests
// can put small generated data sets on disk. Stateless free functions; safe
// to call from any thread (on different paths).
#ifndef PS_WORKER_TRAIN_IDX_WRITER_H_
#define PS_WORKER_TRAIN_IDX_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/train/dataset.h"
#include "worker/train/idx_reader.h"

namespace ps {

// Writes an unsigned-byte IDX file: magic 0x000008NN (NN = dims.size()), the
// dimensions, then `data`, which must hold product(dims) bytes. Errors:
// INVALID_ARGUMENT when it does not or a dimension is outside [0, 2^32);
// INTERNAL (naming the path) when the file cannot be written.
absl::Status WriteIdxFile(const std::string& path, const std::vector<int64_t>& dims,
                          const std::vector<uint8_t>& data);

// Writes `data` as an images file (num_examples x rows x cols; pixels in
// [0, 1] rounded to bytes) and a labels file. Errors: INVALID_ARGUMENT when
// data.dim != rows * cols or a label is outside [0, 255]; those of
// WriteIdxFile.
absl::Status WriteIdxDataset(const Dataset& data, int rows, int cols, const IdxPaths& paths);

}  // namespace ps

#endif  // PS_WORKER_TRAIN_IDX_WRITER_H_
