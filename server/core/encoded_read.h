// Reads into a reply in the encoding the client asked for: float32 straight
// into the reply's buffer, or through a scratch buffer for a 16-bit encoding
// (common/value_encoding.h). Header-only; no state.
#ifndef PS_SERVER_CORE_ENCODED_READ_H_
#define PS_SERVER_CORE_ENCODED_READ_H_

#include <cstddef>
#include <functional>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "common/value_encoding.h"
#include "proto/ps.pb.h"

namespace ps {

// Runs read(room), where room(bytes) gives the store a buffer for float32
// values. For a 16-bit encoding the floats go to a scratch buffer and are
// encoded into allocate()'s, which is called once with the encoded size.
template <typename Read>
auto ReadEncoded(proto::ValueEncoding encoding, const std::function<char*(size_t)>& allocate,
                 Read read) -> decltype(read(absl::FunctionRef<char*(size_t)>(allocate))) {
  if (encoding == proto::VALUES_F32) {
    return read(absl::FunctionRef<char*(size_t)>(allocate));
  }
  std::unique_ptr<float[]> scratch;
  size_t count = 0;
  auto result = read(absl::FunctionRef<char*(size_t)>([&](size_t bytes) {
    count = bytes / sizeof(float);
    scratch.reset(new float[count]);
    return reinterpret_cast<char*>(scratch.get());
  }));
  if (result.ok() && count > 0) {
    // Sizes were validated before anything was read: every caller's
    // allocate accepts the encoded size of what was read.
    char* out = allocate(count * BytesPerValue(encoding));
    EncodeValues(encoding, absl::MakeConstSpan(scratch.get(), count), out);
  }
  return result;
}

}  // namespace ps

#endif  // PS_SERVER_CORE_ENCODED_READ_H_
