// FirstNonFinite: the gradient check of every push (ShardStore), written
// so that the compiler vectorizes it.
#ifndef PS_SERVER_STORE_FINITE_CHECK_H_
#define PS_SERVER_STORE_FINITE_CHECK_H_

#include <cstddef>

#include "absl/types/span.h"

namespace ps {

// Index of the first NaN or Inf in v, or v.size().
size_t FirstNonFinite(absl::Span<const float> v);

}  // namespace ps

#endif  // PS_SERVER_STORE_FINITE_CHECK_H_
