#include "server/store/finite_check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ps {
namespace {

// Whether one of the groups * kFiniteLanes floats at p is NaN or Inf. A
// float is NaN or Inf exactly when its exponent bits are all ones: then
// (bits & exponent) + the exponent's lowest bit carries into bit 31, and
// only then. Each lane ORs into its own word over a loop of a fixed count,
// the form GCC's -O2 (its cost model vectorizes no loop that needs a
// remainder) turns into vector instructions; a scalar loop here took 15% of
// a server's CPU on 1M-float pushes (2026-11-27).
constexpr size_t kFiniteLanes = 16;
bool NonFiniteInLanes(const float* p, size_t groups) {
  constexpr uint32_t kExponent = 0x7f800000u, kExponentLow = 0x00800000u;
  uint32_t lanes[kFiniteLanes] = {};
  for (size_t g = 0; g < groups; ++g, p += kFiniteLanes) {
    for (size_t j = 0; j < kFiniteLanes; ++j) {
      uint32_t bits;
      std::memcpy(&bits, p + j, sizeof bits);
      lanes[j] |= (bits & kExponent) + kExponentLow;
    }
  }
  uint32_t bad = 0;
  for (size_t j = 0; j < kFiniteLanes; ++j) bad |= lanes[j];
  return (bad >> 31) != 0;
}

}  // namespace

// Checks blocks with the vectorized lanes and looks for the culprit only in
// a bad block.
size_t FirstNonFinite(absl::Span<const float> v) {
  constexpr size_t kBlock = 4096;  // a multiple of kFiniteLanes
  for (size_t b = 0; b < v.size(); b += kBlock) {
    const size_t n = std::min(kBlock, v.size() - b);
    const size_t in_lanes = n / kFiniteLanes * kFiniteLanes;
    bool bad = NonFiniteInLanes(v.data() + b, n / kFiniteLanes);
    for (size_t i = b + in_lanes; i < b + n; ++i) bad |= !std::isfinite(v[i]);
    if (!bad) continue;
    for (size_t i = b; i < b + n; ++i) {
      if (!std::isfinite(v[i])) return i;
    }
  }
  return v.size();
}

}  // namespace ps
