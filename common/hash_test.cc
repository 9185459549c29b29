#include "common/hash.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace ps {
namespace {

// Placement depends on these values on every machine: they are pinned
// (SplitMix64's finalizer; Mix64(0) is the first output of SplitMix64
// seeded with 0).
TEST(HashTest, Mix64KeepsItsValues) {
  EXPECT_EQ(Mix64(0), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(Mix64(1), 0x910a2dec89025cc1ULL);
  EXPECT_EQ(Mix64(~uint64_t{0}), 0xe4d971771b652c20ULL);
}

// The vector form against the scalar one, for every length around the
// eight-key steps (tails included), into another array and in place.
TEST(HashTest, Mix64ManyEqualsMix64) {
  std::mt19937_64 rng(7);
  for (size_t n = 0; n <= 41; ++n) {
    std::vector<uint64_t> keys(n);
    for (uint64_t& k : keys) k = rng();
    if (n > 0) keys[0] = ~uint64_t{0};
    std::vector<uint64_t> out(n + 1, 12345);  // one more: nothing written past n
    Mix64Many(keys.data(), out.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], Mix64(keys[i])) << "n " << n << " i " << i;
    EXPECT_EQ(out[n], 12345u);
    std::vector<uint64_t> in_place = keys;
    Mix64Many(in_place.data(), in_place.data(), n);
    EXPECT_EQ(in_place, std::vector<uint64_t>(out.begin(), out.begin() + n));
  }
}

}  // namespace
}  // namespace ps
