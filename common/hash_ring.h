// Consistent-hash ring with virtual nodes.
//
// Members are numbered 0..n-1 (server indices in the cluster spec). Member m
// places `virtual_nodes` points on a 64-bit ring at hashes of ("server", m, v);
// a hash is owned by the first point at or after it, wrapping around. Points
// depend only on (m, v), so growing the ring from n to n+1 members moves keys
// only to the new member. Immutable after construction; thread-safe.
#ifndef PS_COMMON_HASH_RING_H_
#define PS_COMMON_HASH_RING_H_

#include <cstdint>
#include <vector>

namespace ps {

class HashRing {
 public:
  static constexpr int kDefaultVirtualNodes = 512;

  // num_members >= 1, virtual_nodes >= 1.
  HashRing(int num_members, int virtual_nodes = kDefaultVirtualNodes);

  // The member owning `hash`.
  int Owner(uint64_t hash) const;

  int num_members() const { return num_members_; }
  int virtual_nodes() const { return virtual_nodes_; }

 private:
  struct Point {
    uint64_t hash;
    int member;
  };
  int num_members_;
  int virtual_nodes_;
  std::vector<Point> points_;  // sorted by hash
};

}  // namespace ps

#endif  // PS_COMMON_HASH_RING_H_
