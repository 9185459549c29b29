// A table definition's key-to-slice layout (see TableLayout in placement.h),
// shared by the client's routing and the server's store.
#ifndef PS_COMMON_TABLE_LAYOUT_H_
#define PS_COMMON_TABLE_LAYOUT_H_

#include <cstdint>

#include "common/placement.h"
#include "proto/ps.pb.h"

namespace ps {

// Slices of a sparse table whose definition leaves num_buckets at 0.
inline constexpr uint64_t kDefaultSparseBuckets = 1024;

inline TableLayout LayoutOf(const proto::TableDef& def) {
  TableLayout layout;
  layout.sparse = def.kind() == proto::TABLE_SPARSE;
  if (layout.sparse) {
    layout.num_buckets = def.num_buckets() != 0 ? def.num_buckets() : kDefaultSparseBuckets;
  }
  return layout;
}

}  // namespace ps

#endif  // PS_COMMON_TABLE_LAYOUT_H_
