#include "common/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>
#elif defined(__aarch64__)
#include <arm_acle.h>
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#endif

namespace ps {
namespace crc32c_internal {
namespace {

constexpr uint32_t kReflectedPoly = 0x82f63b78;

std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) != 0 ? (c >> 1) ^ kReflectedPoly : c >> 1;
    table[i] = c;
  }
  return table;
}

#if defined(__x86_64__)
bool CpuHasCrc() {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_SSE4_2) != 0;
}

__attribute__((target("sse4.2"))) uint32_t Instructions(const char* p, size_t n, uint32_t crc) {
  uint64_t c = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = _mm_crc32_u8(c32, static_cast<uint8_t>(*p));
  return ~c32;
}
#elif defined(__aarch64__)
bool CpuHasCrc() { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }

__attribute__((target("+crc"))) uint32_t Instructions(const char* p, size_t n, uint32_t crc) {
  uint32_t c = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = __crc32cd(c, word);
  }
  for (; n > 0; ++p, --n) c = __crc32cb(c, static_cast<uint8_t>(*p));
  return ~c;
}
#else
bool CpuHasCrc() { return false; }
uint32_t Instructions(const char* p, size_t n, uint32_t crc) { return Portable(p, n, crc); }
#endif

}  // namespace

uint32_t Portable(const char* p, size_t n, uint32_t crc) {
  static const std::array<uint32_t, 256> table = MakeTable();
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; ++i) c = table[(c ^ static_cast<uint8_t>(p[i])) & 0xff] ^ (c >> 8);
  return ~c;
}

bool Hardware(const char* p, size_t n, uint32_t* crc) {
  static const bool has = CpuHasCrc();
  if (!has) return false;
  *crc = Instructions(p, n, *crc);
  return true;
}

}  // namespace crc32c_internal

uint32_t Crc32c(const char* p, size_t n, uint32_t crc) {
  if (crc32c_internal::Hardware(p, n, &crc)) return crc;
  return crc32c_internal::Portable(p, n, crc);
}

}  // namespace ps
