#include "common/raw_message.h"

#include <vector>

#include "gtest/gtest.h"
#include "proto/ps.pb.h"

namespace ps {
namespace {

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// The bytes cut into slices of `piece` bytes (to exercise boundaries).
std::vector<grpc::Slice> Cut(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i < bytes.size(); i += piece) {
    slices.emplace_back(bytes.data() + i, std::min(piece, bytes.size() - i));
  }
  return slices;
}

proto::PushRequest Header() {
  proto::PushRequest req;
  req.set_table("emb");
  proto::KeyRange* r = req.add_ranges();
  r->set_begin(3);
  r->set_end(300);
  req.set_worker_id(7);
  req.set_clock(1u << 20);
  req.set_request_id(123456789012345ULL);
  return req;
}

TEST(RawMessageTest, BuiltMessageParsesAsProtobuf) {
  std::vector<float> payload(1000);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = i * 0.5f;
  const absl::string_view bytes(reinterpret_cast<const char*>(payload.data()),
                                payload.size() * sizeof(float));
  int released = 0;
  {
    // Three pieces, one of them empty.
    const absl::string_view pieces[3] = {bytes.substr(0, 1000), bytes.substr(1000, 0),
                                         bytes.substr(1000)};
    grpc::ByteBuffer buffer = BuildMessage(
        Header(), 4, pieces, [](void* arg) { ++*static_cast<int*>(arg); }, &released);
    EXPECT_EQ(released, 1) << "the empty piece is released at once";
    proto::PushRequest parsed;
    ASSERT_TRUE(parsed.ParseFromString(Flatten(buffer)));
    proto::PushRequest expected = Header();
    expected.set_values(std::string(bytes));
    EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());
    EXPECT_EQ(released, 1) << "released while the buffer still refers to it";
  }
  EXPECT_EQ(released, 3);
}

TEST(RawMessageTest, SplitFindsRawFieldsAcrossSliceBoundaries) {
  proto::PushRequest full = Header();
  std::string values(4096, '\0');
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<char>(i * 7);
  full.set_values(values);
  full.set_key_list("\x01\x02\x03\x04\x05\x06\x07\x08");
  const std::string wire = full.SerializeAsString();
  for (size_t piece : {1, 3, 64, 100000}) {
    const std::vector<grpc::Slice> slices = Cut(wire, piece);  // views point into these
    SplitFields fields;
    ASSERT_TRUE(SplitMessage(slices, {3, 4}, &fields).ok()) << piece;
    proto::PushRequest header;
    ASSERT_TRUE(header.ParseFromString(fields.header));
    EXPECT_EQ(header.SerializeAsString(), Header().SerializeAsString()) << piece;
    std::string flat;
    EXPECT_EQ(fields.Raw(4).Flatten(&flat), values) << piece;
    EXPECT_EQ(fields.Raw(3).Flatten(&flat), full.key_list()) << piece;
    std::string again(values.size(), '\0');
    SegmentedBytes::Reader reader(fields.Raw(4));
    reader.Read(7, &again[0]);
    reader.Read(values.size() - 7, &again[7]);
    EXPECT_EQ(again, values) << piece;
    std::string middle(10, '\0');
    fields.Raw(4).CopyOut(1000, 10, &middle[0]);
    EXPECT_EQ(middle, values.substr(1000, 10));
  }
}

TEST(RawMessageTest, AbsentRawFieldIsEmpty) {
  const std::vector<grpc::Slice> slices = Cut(Header().SerializeAsString(), 5);
  SplitFields fields;
  ASSERT_TRUE(SplitMessage(slices, {4}, &fields).ok());
  EXPECT_TRUE(fields.Raw(4).empty());
}

TEST(RawMessageTest, MalformedWireDataIsRejected) {
  proto::PushRequest full = Header();
  full.set_values(std::string(100, 'x'));
  std::string wire = full.SerializeAsString();
  SplitFields fields;
  EXPECT_EQ(SplitMessage(Cut(wire.substr(0, wire.size() - 1), 8), {4}, &fields).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(SplitMessage(Cut(std::string("\x80", 1), 1), {4}, &fields).ok());
  // Field 4 sent as a varint.
  EXPECT_FALSE(SplitMessage(Cut(std::string("\x20\x01", 2), 1), {4}, &fields).ok());
}

TEST(SegmentedBytesTest, SubViewsAnyRangeAcrossPieces) {
  const std::string a = "abc", b = "defgh", c = "ij";
  SegmentedBytes bytes;
  bytes.Append(a);
  bytes.Append(b);
  bytes.Append(c);
  for (size_t offset = 0; offset <= 10; ++offset) {
    for (size_t n = 0; offset + n <= 10; ++n) {
      SegmentedBytes sub = bytes.Sub(offset, n);
      ASSERT_EQ(sub.size(), n);
      std::string flat;
      EXPECT_EQ(std::string(sub.Flatten(&flat)), std::string("abcdefghij").substr(offset, n));
    }
  }
}

}  // namespace
}  // namespace ps
