// Where each key of a table lives.
//
// Dense tables are cut into slices of `slice_size` consecutive keys; a slice
// is the unit that is placed on a server, locked and applied. Slice s of table
// t is owned by ring.Owner(hash(t, s)). Servers and workers build the same
// Placement from the same (num_servers, PlacementConfig), so they agree on
// every key. Immutable after construction; thread-safe.
#ifndef PS_COMMON_PLACEMENT_H_
#define PS_COMMON_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/hash.h"
#include "common/hash_ring.h"

namespace ps {

struct PlacementConfig {
  uint64_t slice_size = 4096;  // keys per slice, >= 1
  int virtual_nodes = HashRing::kDefaultVirtualNodes;
};

// How a table's keys map to slices: dense tables by runs of slice_size
// consecutive keys (Placement::SliceOf), sparse tables by hash into
// num_buckets slices (Placement::SparseSliceOf).
struct TableLayout {
  bool sparse = false;
  uint64_t num_buckets = 0;  // sparse tables only
};

// A run of consecutive keys [begin, end) inside one slice.
struct RangePart {
  uint64_t begin;
  uint64_t end;
  int owner;
};

class Placement {
 public:
  Placement(int num_servers, PlacementConfig config = {});

  // A shift for a power-of-two slice size (the default): a 64-bit division
  // per key was a tenth of a 10,000-key request's planning.
  uint64_t SliceOf(uint64_t key) const {
    return slice_shift_ >= 0 ? key >> slice_shift_ : key / config_.slice_size;
  }
  int OwnerOfSlice(absl::string_view table, uint64_t slice) const;
  int OwnerOfKey(absl::string_view table, uint64_t key) const {
    return OwnerOfSlice(table, SliceOf(key));
  }
  uint64_t SliceOf(const TableLayout& layout, uint64_t key) const {
    return layout.sparse ? SparseSliceOf(key, layout.num_buckets) : SliceOf(key);
  }
  // Sparse tables: the slice of a key is hash(key) mod num_buckets (mapped
  // by a multiply, not a division, from the hash's high bits).
  static uint64_t SparseSliceOf(uint64_t key, uint64_t num_buckets) {
    return SparseSliceOfHash(Mix64(key), num_buckets);
  }
  // The same from Mix64(key), for callers that need the hash too.
  static uint64_t SparseSliceOfHash(uint64_t hash, uint64_t num_buckets) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(hash) * num_buckets) >> 64);
  }
  // The same with the table's name hashed once (TableHash), for loops over
  // many keys of one table.
  static uint64_t TableHash(absl::string_view table);
  int OwnerOfSliceHashed(uint64_t table_hash, uint64_t slice) const;

  // Splits [begin, end) at slice boundaries, each part tagged with its owner.
  // Adjacent slices with the same owner are merged into one part.
  std::vector<RangePart> SplitRange(absl::string_view table, uint64_t begin, uint64_t end) const;

  int num_servers() const { return ring_.num_members(); }
  const PlacementConfig& config() const { return config_; }

 private:
  PlacementConfig config_;
  int slice_shift_ = -1;  // log2(slice_size) when it is a power of two
  HashRing ring_;
};

}  // namespace ps

#endif  // PS_COMMON_PLACEMENT_H_
