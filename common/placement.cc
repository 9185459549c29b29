#include "common/placement.h"

#include <algorithm>

#include "common/hash.h"

namespace ps {

Placement::Placement(int num_servers, PlacementConfig config)
    : config_(config), ring_(num_servers, config.virtual_nodes) {
  if (config_.slice_size == 0) config_.slice_size = 1;
  if ((config_.slice_size & (config_.slice_size - 1)) == 0) {
    slice_shift_ = __builtin_ctzll(config_.slice_size);
  }
}

int Placement::OwnerOfSlice(absl::string_view table, uint64_t slice) const {
  return OwnerOfSliceHashed(TableHash(table), slice);
}

uint64_t Placement::TableHash(absl::string_view table) { return HashString(table); }

int Placement::OwnerOfSliceHashed(uint64_t table_hash, uint64_t slice) const {
  if (ring_.num_members() == 1) return 0;
  return ring_.Owner(HashCombine(table_hash, slice));
}

std::vector<RangePart> Placement::SplitRange(absl::string_view table, uint64_t begin,
                                             uint64_t end) const {
  std::vector<RangePart> parts;
  const uint64_t table_hash = HashString(table);
  uint64_t k = begin;
  while (k < end) {
    const uint64_t slice = k / config_.slice_size;
    const uint64_t slice_end = std::min(end, (slice + 1) * config_.slice_size);
    const int owner = ring_.num_members() == 1 ? 0 : ring_.Owner(HashCombine(table_hash, slice));
    if (!parts.empty() && parts.back().owner == owner && parts.back().end == k) {
      parts.back().end = slice_end;
    } else {
      parts.push_back({k, slice_end, owner});
    }
    k = slice_end;
  }
  return parts;
}

}  // namespace ps
