#include "common/hash_ring.h"

#include <algorithm>

#include "common/hash.h"

namespace ps {

HashRing::HashRing(int num_members, int virtual_nodes)
    : num_members_(num_members < 1 ? 1 : num_members),
      virtual_nodes_(virtual_nodes < 1 ? 1 : virtual_nodes) {
  points_.reserve(static_cast<size_t>(num_members_) * virtual_nodes_);
  const uint64_t salt = HashString("server");
  for (int m = 0; m < num_members_; ++m) {
    for (int v = 0; v < virtual_nodes_; ++v) {
      points_.push_back({HashCombine(HashCombine(salt, m), v), m});
    }
  }
  std::sort(points_.begin(), points_.end(), [](const Point& a, const Point& b) {
    return a.hash != b.hash ? a.hash < b.hash : a.member < b.member;
  });
}

int HashRing::Owner(uint64_t hash) const {
  auto it = std::lower_bound(points_.begin(), points_.end(), hash,
                             [](const Point& p, uint64_t h) { return p.hash < h; });
  if (it == points_.end()) it = points_.begin();
  return it->member;
}

}  // namespace ps
