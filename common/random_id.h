// Random 64-bit ids that are never 0 (0 means "none" in the records that
// carry them): server incarnations and replication stream ids.
#ifndef PS_COMMON_RANDOM_ID_H_
#define PS_COMMON_RANDOM_ID_H_

#include <cstdint>
#include <limits>

#include "absl/base/const_init.h"
#include "absl/random/random.h"
#include "absl/synchronization/mutex.h"

namespace ps {

// Thread-safe.
inline uint64_t RandomNonZeroId() {
  static absl::Mutex mu(absl::kConstInit);
  static absl::BitGen* gen = new absl::BitGen();
  absl::MutexLock lock(&mu);
  return absl::Uniform<uint64_t>(*gen, 1, std::numeric_limits<uint64_t>::max());
}

}  // namespace ps

#endif  // PS_COMMON_RANDOM_ID_H_
