// Table definitions for tests: a dense or sparse shape, then an initializer
// and an optimizer set on it. Each function returns a new proto::TableDef;
// fields it does not mention keep the value they had (0 in a fresh def).
// Test-only; no state.
//
//   WithAdagrad(WithUniformInit(DenseTableDef("w", 3000, 2), -0.1f, 0.1f),
//               /*learning_rate=*/0.05f, /*initial_accumulator=*/0.1f)
#ifndef PS_TESTS_TEST_UTIL_TABLE_DEFS_H_
#define PS_TESTS_TEST_UTIL_TABLE_DEFS_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "proto/ps.pb.h"

namespace ps {

// Shapes alone, every other field 0 (zeros, SGD at learning rate 0), as a
// checkpoint's manifest lists its tables.
// Dense: keys [0, num_keys) of `width` floats.
proto::TableDef DenseTableDef(absl::string_view name, uint64_t num_keys, uint32_t width);
// Sparse: any uint64 key, a row created by its first push, in num_buckets
// slices.
proto::TableDef SparseTableDef(absl::string_view name, uint32_t width, uint32_t num_buckets);

// Zeros, SGD with learning rate 1: pushing a gradient of -1 adds exactly 1,
// so after W workers x K pushes every key holds exactly W * K.
proto::TableDef SumTable(absl::string_view name, uint64_t num_keys, uint32_t width);
// The same as a sparse table.
proto::TableDef SparseSumTable(absl::string_view name, uint32_t width, uint32_t num_buckets = 16);

// Initializers: set `initializer` and its parameters.
proto::TableDef WithUniformInit(proto::TableDef def, float low, float high, uint64_t seed = 0);
proto::TableDef WithNormalInit(proto::TableDef def, float mean, float stddev);

// Optimizers: set `optimizer` and its parameters. An optimizer alone, as
// ModelTables takes it, is WithAdagrad(proto::TableDef(), ...).
proto::TableDef WithSgd(proto::TableDef def, float learning_rate);
proto::TableDef WithAdagrad(proto::TableDef def, float learning_rate, float initial_accumulator);
proto::TableDef WithAdam(proto::TableDef def, float learning_rate, float beta1, float beta2,
                         float epsilon);

// The request that creates `def` on a PsCore.
proto::CreateTableRequest CreateTableRequestFor(const proto::TableDef& def);

}  // namespace ps

#endif  // PS_TESTS_TEST_UTIL_TABLE_DEFS_H_
