// Test helpers: slice records in the data-file format (proto SliceHeader,
// server/checkpoint_records.h) and whole checkpoints made of them, written
// through CheckpointFileWriter and CommitCheckpoint exactly as a server
// would. For tests and test fixtures only (testonly); no checks beyond what
// the format needs: tests build broken records on purpose.
#ifndef PS_SERVER_CHECKPOINT_CHECKPOINT_TEST_RECORDS_H_
#define PS_SERVER_CHECKPOINT_CHECKPOINT_TEST_RECORDS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "proto/checkpoint.pb.h"

namespace ps {

// A dense slice record: the values of keys [first_key, first_key + n),
// key-major (n * width floats), then their state (n * state_per_row
// floats); floats_per_row is width + state_per_row.
std::string DenseRecord(const std::string& table, uint64_t slice, uint64_t first_key,
                        uint32_t width, const std::vector<float>& values, uint32_t state_per_row,
                        const std::vector<float>& state);

// A sparse slice record: keys, then their rows (keys.size() * floats_per_row
// floats, each its width values first), then the erased keys.
std::string SparseRecord(const std::string& table, uint64_t slice, uint32_t width,
                         uint32_t floats_per_row, bool delta, const std::vector<uint64_t>& keys,
                         const std::vector<float>& rows, const std::vector<uint64_t>& erased);

// Writes root/ckpt-<sequence>/ holding one data file per (name, bytes) of
// `files` and commits its manifest (full when base_sequence is 0).
absl::Status WriteTestCheckpoint(const std::string& root, uint64_t sequence, uint64_t base_sequence,
                                 const std::vector<proto::TableDef>& tables,
                                 const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_CHECKPOINT_TEST_RECORDS_H_
