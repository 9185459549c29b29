#include "common/crc32c.h"

#include <cstdint>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace ps {
namespace {

// Known values of CRC-32C (RFC 3720, appendix B.4, and the usual check
// value of "123456789").
TEST(Crc32cTest, KnownValues) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);
  const std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8a9136aau);
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62a8ab43u);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<char>(i);
  EXPECT_EQ(Crc32c(ascending.data(), ascending.size()), 0x46dd794eu);
  EXPECT_EQ(Crc32c(nullptr, 0), 0u);
}

// Both ways agree, at every length and alignment around the 8-byte steps,
// and a CRC continued over a split equals the CRC of the whole.
TEST(Crc32cTest, WaysAgreeAndContinue) {
  std::mt19937 rng(3);
  std::string bytes(300, '\0');
  for (char& b : bytes) b = static_cast<char>(rng());
  for (size_t at = 0; at < 9; ++at) {
    for (size_t n = 0; at + n <= bytes.size(); n += (n < 40 ? 1 : 37)) {
      const char* p = bytes.data() + at;
      const uint32_t portable = crc32c_internal::Portable(p, n, 0);
      uint32_t hardware = 0;
      if (crc32c_internal::Hardware(p, n, &hardware)) {
        EXPECT_EQ(hardware, portable) << "at " << at << ", " << n << " bytes";
      }
      EXPECT_EQ(Crc32c(p, n), portable);
      for (size_t split : {size_t{0}, n / 3, n}) {
        EXPECT_EQ(Crc32c(p + split, n - split, Crc32c(p, split)), portable)
            << n << " bytes split at " << split;
      }
    }
  }
}

// One flipped bit anywhere changes it.
TEST(Crc32cTest, NoticesAFlippedBit) {
  std::string bytes(160, 'r');
  const uint32_t whole = Crc32c(bytes.data(), bytes.size());
  for (size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    bytes[bit / 8] = static_cast<char>(bytes[bit / 8] ^ (1 << (bit % 8)));
    EXPECT_NE(Crc32c(bytes.data(), bytes.size()), whole) << "bit " << bit;
    bytes[bit / 8] = static_cast<char>(bytes[bit / 8] ^ (1 << (bit % 8)));
  }
}

}  // namespace
}  // namespace ps
