// Encoding of keys and values on the wire: raw little-endian bytes.
//
// Values are float32 and keys uint64, packed without framing. On a
// little-endian host (checked at compile time) encoding is one memcpy and
// decoding can view the received bytes in place.
#ifndef PS_COMMON_WIRE_H_
#define PS_COMMON_WIRE_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/base/config.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ps {

#if defined(ABSL_IS_BIG_ENDIAN)
#error "the wire format assumes a little-endian host"
#endif

template <typename T>
void EncodeArray(absl::Span<const T> values, std::string* out) {
  out->resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(&(*out)[0], values.data(), out->size());
}

// Views `bytes` as an array of T. If the bytes are not aligned for T they are
// copied into `*storage` first. Errors: INVALID_ARGUMENT when the length is
// not a multiple of sizeof(T); `what` names the field in the message.
template <typename T>
absl::StatusOr<absl::Span<const T>> DecodeArray(absl::string_view bytes, std::vector<T>* storage,
                                                absl::string_view what);

// Copies bytes into `out`, which must have exactly the decoded length.
// Errors: INVALID_ARGUMENT naming `what`, with expected and actual sizes.
template <typename T>
absl::Status DecodeArrayInto(absl::string_view bytes, absl::Span<T> out, absl::string_view what);

}  // namespace ps

#include "common/wire_impl.h"  // IWYU pragma: export

#endif  // PS_COMMON_WIRE_H_
