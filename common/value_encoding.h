// Values on the wire as float32, IEEE binary16 (F16) or bfloat16 (BF16)
// (proto::ValueEncoding). Tables and optimizers always work in float32: a
// sender encodes, a receiver decodes. Conversions to 16 bits round to
// nearest, ties to even; F16 overflows to infinity past 65504 and keeps
// subnormals; NaN stays NaN. On x86 CPUs with F16C the F16 loops use it
// (same results; checked against the portable code in the test).
// Functions are thread-safe.
#ifndef PS_COMMON_VALUE_ENCODING_H_
#define PS_COMMON_VALUE_ENCODING_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/ps.pb.h"

namespace ps {

// Bytes of one value: 4, or 2 for the 16-bit encodings.
inline size_t BytesPerValue(proto::ValueEncoding encoding) {
  return encoding == proto::VALUES_F32 ? 4 : 2;
}

// INVALID_ARGUMENT naming `what` (e.g. "push to table 't'") for a value the
// enum does not define (proto3 lets any number through).
absl::Status CheckValueEncoding(int encoding, absl::string_view what);

// "f32", "f16" or "bf16" (as flags spell them); INVALID_ARGUMENT otherwise.
absl::StatusOr<proto::ValueEncoding> ParseValueEncoding(absl::string_view name);
absl::string_view ValueEncodingName(proto::ValueEncoding encoding);

uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t bits);
uint16_t FloatToBfloat16(float value);
inline float Bfloat16ToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &wide, sizeof(out));
  return out;
}

// Writes values.size() * BytesPerValue(encoding) bytes to out.
void EncodeValues(proto::ValueEncoding encoding, absl::Span<const float> values, char* out);
// Reads n values (n * BytesPerValue(encoding) bytes) from in into out.
void DecodeValues(proto::ValueEncoding encoding, const char* in, size_t n, float* out);

}  // namespace ps

#endif  // PS_COMMON_VALUE_ENCODING_H_
