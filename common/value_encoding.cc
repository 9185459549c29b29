#include "common/value_encoding.h"

#include "absl/strings/str_cat.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define PS_HAVE_F16C_PATH 1
#endif

namespace ps {
namespace {

uint32_t BitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float FloatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

#if defined(PS_HAVE_F16C_PATH)
// Eight values per instruction; the tails go through the portable code.
__attribute__((target("avx,f16c"))) void EncodeHalfF16c(const float* in, size_t n, uint16_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = FloatToHalf(in[i]);
}

__attribute__((target("avx,f16c"))) void DecodeHalfF16c(const uint16_t* in, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = HalfToFloat(in[i]);
}

// CPUID leaf 1: AVX (ECX bit 28) and F16C (bit 29), and the OS saving the
// AVX registers (OSXSAVE, bit 27, and XCR0 bits 1 and 2). Asked directly:
// not every compiler knows "f16c" in __builtin_cpu_supports.
bool DetectF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  constexpr unsigned kBits = (1u << 27) | (1u << 28) | (1u << 29);
  if ((ecx & kBits) != kBits) return false;
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 6u) == 6u;
}

bool HasF16c() {
  static const bool has = DetectF16c();
  return has;
}
#endif

}  // namespace

absl::Status CheckValueEncoding(int encoding, absl::string_view what) {
  if (proto::ValueEncoding_IsValid(encoding)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " has value_encoding ", encoding,
                   ", which this server does not know (0 float32, 1 float16, 2 bfloat16)"));
}

absl::StatusOr<proto::ValueEncoding> ParseValueEncoding(absl::string_view name) {
  if (name == "f32") return proto::VALUES_F32;
  if (name == "f16") return proto::VALUES_F16;
  if (name == "bf16") return proto::VALUES_BF16;
  return absl::InvalidArgumentError(
      absl::StrCat("'", name, "' is not a value encoding: expected f32, f16 or bf16"));
}

absl::string_view ValueEncodingName(proto::ValueEncoding encoding) {
  switch (encoding) {
    case proto::VALUES_F16:
      return "f16";
    case proto::VALUES_BF16:
      return "bf16";
    default:
      return "f32";
  }
}

uint16_t FloatToHalf(float value) {
  uint32_t x = BitsOf(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  x &= 0x7fffffff;
  if (x >= 0x7f800000) {  // infinity, or NaN (kept quiet and NaN)
    return sign | 0x7c00 | (x > 0x7f800000 ? 0x0200 : 0);
  }
  // 65520 and above round to infinity (65504 is the largest half).
  if (x >= 0x477ff000) return sign | 0x7c00;
  if (x < 0x38800000) {
    // Below the smallest normal half (2^-14): a subnormal m * 2^-24. Adding
    // 0.5 makes the FPU round |value| to a multiple of 2^-24 (the ulp at
    // 0.5), ties to even; m is then the mantissa's distance from 0.5's.
    // m = 1024 becomes the smallest normal, as the bits say.
    return sign | static_cast<uint16_t>(BitsOf(FloatOf(x) + 0.5f) - 0x3f000000);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits
  // to nearest, ties to even (a carry into the exponent is right).
  const uint32_t odd = (x >> 13) & 1;
  x += 0xc8000fff + odd;  // - (112 << 23) + 0xfff + odd, modulo 2^32
  return sign | static_cast<uint16_t>(x >> 13);
}

float HalfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1f;
  const uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exactly
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return FloatOf(sign | BitsOf(magnitude));
  }
  if (exponent == 31) return FloatOf(sign | 0x7f800000 | (mantissa << 13));
  return FloatOf(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t FloatToBfloat16(float value) {
  const uint32_t x = BitsOf(value);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  // Round the low 16 bits to nearest, ties to even; overflow reaches
  // infinity through the carry, as it should.
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

void EncodeValues(proto::ValueEncoding encoding, absl::Span<const float> values, char* out) {
  const size_t n = values.size();
  if (encoding == proto::VALUES_F32) {
    if (n > 0) std::memcpy(out, values.data(), n * sizeof(float));
    return;
  }
  // Built in a local array and copied: `out` need not be aligned.
  constexpr size_t kBlock = 256;
  uint16_t block[kBlock];
  for (size_t begin = 0; begin < n; begin += kBlock) {
    const size_t count = std::min(kBlock, n - begin);
    const float* in = values.data() + begin;
    if (encoding == proto::VALUES_BF16) {
      for (size_t i = 0; i < count; ++i) block[i] = FloatToBfloat16(in[i]);
    } else {
#if defined(PS_HAVE_F16C_PATH)
      if (HasF16c()) {
        EncodeHalfF16c(in, count, block);
      } else
#endif
      {
        for (size_t i = 0; i < count; ++i) block[i] = FloatToHalf(in[i]);
      }
    }
    std::memcpy(out + begin * 2, block, count * 2);
  }
}

void DecodeValues(proto::ValueEncoding encoding, const char* in, size_t n, float* out) {
  if (encoding == proto::VALUES_F32) {
    if (n > 0) std::memcpy(out, in, n * sizeof(float));
    return;
  }
  constexpr size_t kBlock = 256;
  uint16_t block[kBlock];
  for (size_t begin = 0; begin < n; begin += kBlock) {
    const size_t count = std::min(kBlock, n - begin);
    std::memcpy(block, in + begin * 2, count * 2);
    float* dst = out + begin;
    if (encoding == proto::VALUES_BF16) {
      for (size_t i = 0; i < count; ++i) dst[i] = Bfloat16ToFloat(block[i]);
    } else {
#if defined(PS_HAVE_F16C_PATH)
      if (HasF16c()) {
        DecodeHalfF16c(block, count, dst);
      } else
#endif
      {
        for (size_t i = 0; i < count; ++i) dst[i] = HalfToFloat(block[i]);
      }
    }
  }
}

}  // namespace ps
