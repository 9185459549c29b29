#include "common/value_encoding.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace ps {
namespace {

float FloatOf(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

TEST(HalfTest, KnownValuesAndTies) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);  // largest half
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);  // below the halfway point
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // halfway: to even, which is infinity
  EXPECT_EQ(FloatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-1e10f), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);         // smallest normal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);         // halfway to 0: even
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);         // halfway 1..2: even
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.5f, -24)), 0x0400);      // rounds up into the normals
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie, even below
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie, even above
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0xfc00), -std::numeric_limits<float>::infinity());
}

TEST(HalfTest, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_EQ(h & 0x7c00, 0x7c00u) << h;
      continue;
    }
    ASSERT_EQ(FloatToHalf(f), h) << "half 0x" << std::hex << h;
  }
}

// Every float between two neighbouring halves goes to the nearer one.
TEST(HalfTest, RoundsToNearest) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits(0, 0x477fe000);  // up to 65504
  for (int i = 0; i < 200000; ++i) {
    const float f = FloatOf(bits(rng));
    const uint16_t h = FloatToHalf(f);
    const double error = std::fabs(static_cast<double>(HalfToFloat(h)) - f);
    const double below = std::fabs(static_cast<double>(HalfToFloat(h - (h > 0 ? 1 : 0))) - f);
    const double above = std::fabs(static_cast<double>(HalfToFloat(h + 1)) - f);
    ASSERT_LE(error, below) << f;
    ASSERT_LE(error, above) << f;
  }
}

TEST(Bfloat16Test, KnownValuesTiesAndRoundTrip) {
  EXPECT_EQ(FloatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBfloat16(-1.0f), 0xbf80);
  EXPECT_EQ(FloatToBfloat16(FloatOf(0x3f808000)), 0x3f80);                // tie, even below
  EXPECT_EQ(FloatToBfloat16(FloatOf(0x3f818000)), 0x3f82);                // tie, even above
  EXPECT_EQ(FloatToBfloat16(FloatOf(0x3f808001)), 0x3f81);                // above the tie
  EXPECT_EQ(FloatToBfloat16(std::numeric_limits<float>::max()), 0x7f80);  // to infinity
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(FloatToBfloat16(std::nanf("")))));
  // A NaN whose payload is all in the dropped bits stays NaN.
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(FloatToBfloat16(FloatOf(0x7f800001)))));
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = Bfloat16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToBfloat16(f), b);
  }
}

// The block loops (and the F16C instructions where the CPU has them) give
// the scalar functions' results, at every length and alignment.
TEST(ValueEncodingTest, ArraysMatchTheScalarFunctions) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> values(1000);
  for (float& v : values) {
    do {
      v = FloatOf(bits(rng));
    } while (std::isnan(v));
  }
  for (proto::ValueEncoding e : {proto::VALUES_F16, proto::VALUES_BF16, proto::VALUES_F32}) {
    for (size_t n : {0, 1, 7, 8, 9, 255, 256, 257, 1000}) {
      std::vector<char> wire(n * BytesPerValue(e) + 1);
      char* out = wire.data() + 1;  // unaligned on purpose
      EncodeValues(e, absl::MakeConstSpan(values.data(), n), out);
      std::vector<float> back(n);
      DecodeValues(e, out, n, back.data());
      for (size_t i = 0; i < n; ++i) {
        float expected = values[i];
        if (e != proto::VALUES_F32) {
          uint16_t h;
          std::memcpy(&h, out + 2 * i, 2);
          const uint16_t scalar =
              e == proto::VALUES_F16 ? FloatToHalf(values[i]) : FloatToBfloat16(values[i]);
          ASSERT_EQ(h, scalar) << "encoding " << e << " value " << values[i];
          expected = e == proto::VALUES_F16 ? HalfToFloat(scalar) : Bfloat16ToFloat(scalar);
        }
        ASSERT_EQ(std::memcmp(&back[i], &expected, 4), 0) << "encoding " << e << " i " << i;
      }
    }
  }
}

TEST(ValueEncodingTest, ParsesFlagSpellings) {
  for (proto::ValueEncoding e : {proto::VALUES_F32, proto::VALUES_F16, proto::VALUES_BF16}) {
    EXPECT_EQ(*ParseValueEncoding(ValueEncodingName(e)), e);
  }
  absl::StatusOr<proto::ValueEncoding> bad = ParseValueEncoding("fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'fp8'"), std::string::npos);
}

TEST(ValueEncodingTest, UnknownEncodingIsNamed) {
  EXPECT_TRUE(CheckValueEncoding(2, "push").ok());
  absl::Status s = CheckValueEncoding(9, "push to table 't'");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("push to table 't' has value_encoding 9"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace ps
