#include "common/wire.h"

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(WireTest, FloatsRoundTrip) {
  const std::vector<float> v = {1.5f, -2.0f, 3.25f};
  std::string bytes;
  EncodeArray<float>(v, &bytes);
  EXPECT_EQ(bytes.size(), 12u);
  std::vector<float> storage;
  auto view = DecodeArray<float>(bytes, &storage, "values");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(std::vector<float>(view->begin(), view->end()), v);
  std::vector<float> out(3);
  ASSERT_TRUE(DecodeArrayInto<float>(bytes, absl::MakeSpan(out), "values").ok());
  EXPECT_EQ(out, v);
}

TEST(WireTest, MisalignedBytesAreCopied) {
  const std::vector<uint64_t> keys = {1, 1ULL << 40, 7};
  std::string bytes;
  EncodeArray<uint64_t>(keys, &bytes);
  std::string shifted = "x" + bytes;
  std::vector<uint64_t> storage;
  auto view = DecodeArray<uint64_t>(absl::string_view(shifted).substr(1), &storage, "keys");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(std::vector<uint64_t>(view->begin(), view->end()), keys);
}

TEST(WireTest, BadLengthsAreRejectedNamingTheField) {
  std::vector<float> storage;
  auto view = DecodeArray<float>("abcde", &storage, "push values");
  EXPECT_EQ(view.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(view.status().message().find("push values has 5 bytes"), std::string::npos);
  std::vector<float> out(2);
  EXPECT_FALSE(DecodeArrayInto<float>("abcd", absl::MakeSpan(out), "pull values").ok());
}

}  // namespace
}  // namespace ps
