// Validation and comparison of table definitions (proto::TableDef), shared by
// the server (which enforces them) and workers (which build them).
#ifndef PS_COMMON_TABLE_DEF_H_
#define PS_COMMON_TABLE_DEF_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "proto/ps.pb.h"

namespace ps {

// Largest number of values (num_keys * width) one dense table may hold per
// job.
inline constexpr uint64_t kMaxTableValues = uint64_t{1} << 34;
// Sparse tables: slices (each an empty map and a lock until rows arrive),
// and values per row.
inline constexpr uint32_t kMaxSparseBuckets = uint32_t{1} << 20;
inline constexpr uint32_t kMaxSparseWidth = uint32_t{1} << 16;
// admit_after_pushes counts saturate there (8-bit counters).
inline constexpr uint32_t kMaxAdmitAfterPushes = 255;

// OK, or INVALID_ARGUMENT naming the table and the offending field: empty or
// over-long name, unknown kind, width 0, num_keys 0 (dense) or not 0
// (sparse), too many values, num_buckets on a dense table or over the limit,
// unknown initializer, optimizer or schedule, non-finite or out-of-range
// hyper-parameters.
absl::Status ValidateTableDef(const proto::TableDef& def);

// True when both definitions describe the same table (field by field).
bool SameTableDef(const proto::TableDef& a, const proto::TableDef& b);

// One line, for logs and error messages.
std::string TableDefSummary(const proto::TableDef& def);

}  // namespace ps

#endif  // PS_COMMON_TABLE_DEF_H_
