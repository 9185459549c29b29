// Deterministic initial values for a table.
//
// The value of (table, key, column) depends only on the table's initializer
// and seed and on (key, column): a counter-based generator, so every server
// initializes a key the same way whatever the cluster size or slice layout.
// Pure functions; thread-safe.
#ifndef PS_SERVER_STORE_INITIALIZER_H_
#define PS_SERVER_STORE_INITIALIZER_H_

#include <cstdint>

#include "proto/ps.pb.h"

namespace ps {

// Writes the initial values of keys [first_key, first_key + num_keys) into
// out[0 .. num_keys * def.width()). `def` must be valid (ValidateTableDef).
void InitializeValues(const proto::TableDef& def, uint64_t first_key, uint64_t num_keys,
                      float* out);

}  // namespace ps

#endif  // PS_SERVER_STORE_INITIALIZER_H_
