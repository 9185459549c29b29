// The request codec without sockets: requests carry the parts' keys and
// stamps, float32 push values are viewed in the caller's memory (not
// copied), 16-bit values are encoded, and replies land where the parts say.
#include "worker/client/request_codec.h"

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "common/value_encoding.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/client/fake_transport.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Part DensePart(int server, size_t op, std::string table, uint64_t width,
               std::vector<PlannedRange> ranges) {
  Part part;
  part.server = server;
  part.op = op;
  part.table = std::move(table);
  part.width = width;
  part.ranges = std::move(ranges);
  return part;
}

Part KeyPart(int server, uint64_t width, std::vector<size_t> positions) {
  Part part;
  part.server = server;
  part.table = "rows";
  part.width = width;
  part.positions = std::move(positions);
  return part;
}

std::vector<uint64_t> Unpack(const std::string& packed) {
  std::vector<uint64_t> keys(packed.size() / sizeof(uint64_t));
  std::memcpy(keys.data(), packed.data(), packed.size());
  return keys;
}

std::string Bytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

TEST(RequestCodecTest, DensePushesStampEachPartAndViewTheCallersGradients) {
  // Op 0: keys [10, 12) and [20, 21) of width 2 on server 1; op 1: [0, 3).
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  const std::vector<float> b = {7, 8, 9};
  const PushRange ops[] = {{"a", 10, 21, a}, {"b", 0, 3, b}};
  std::vector<Part> parts = {DensePart(1, 0, "a", 2, {{10, 12, 0}, {20, 21, 4}}),
                             DensePart(0, 1, "b", 1, {{0, 3, 0}})};
  parts[0].round_parts = 2;
  RequestStamp stamp{7, 9, proto::CONSISTENCY_BOUNDED, 2, proto::VALUES_F32};
  std::atomic<uint64_t> next_id{100};
  PushRequests out;
  BuildPushRequests(parts, ops, stamp, &next_id, &out);

  ASSERT_EQ(out.headers.size(), 2u);
  EXPECT_EQ(next_id.load(), 102u);
  const proto::PushRequest& h = out.headers[0];
  EXPECT_EQ(h.table(), "a");
  EXPECT_EQ(h.worker_id(), 7u);
  EXPECT_EQ(h.clock(), 9u);
  EXPECT_EQ(h.request_id(), 100u);
  EXPECT_EQ(h.round_parts(), 2u);
  EXPECT_EQ(h.consistency(), proto::CONSISTENCY_BOUNDED);
  EXPECT_EQ(h.staleness(), 2u);
  EXPECT_EQ(h.value_encoding(), proto::VALUES_F32);
  EXPECT_TRUE(h.values().empty());
  ASSERT_EQ(h.ranges_size(), 2);
  EXPECT_EQ(h.ranges(1).begin(), 20u);
  EXPECT_EQ(h.ranges(1).end(), 21u);
  EXPECT_EQ(out.headers[1].request_id(), 101u);
  // No copy: each range's values are a view of the gradients.
  ASSERT_EQ(out.pieces[0].size(), 2u);
  EXPECT_EQ(out.pieces[0][0].data(), reinterpret_cast<const char*>(a.data()));
  EXPECT_EQ(out.pieces[0][0].size(), 4 * sizeof(float));
  EXPECT_EQ(out.pieces[0][1].data(), reinterpret_cast<const char*>(a.data() + 4));
  EXPECT_EQ(out.pieces[0][1].size(), 2 * sizeof(float));
  EXPECT_EQ(out.pieces[1][0].data(), reinterpret_cast<const char*>(b.data()));
  EXPECT_TRUE(out.encoded.empty());
}

// LARS: an op's layer norms go with each of its parts (each server scales
// its part by the whole layer's ratio); an op without them sends none.
TEST(RequestCodecTest, LayerNormsGoWithEveryPartOfTheirOp) {
  const std::vector<float> a = {1, 2, 3, 4};
  const std::vector<float> b = {5};
  proto::LayerNorms norms;
  norms.set_weight(3);
  norms.set_gradient(4);
  PushRange with_norms{"a", 0, 4, a};
  with_norms.layer_norms = &norms;
  const PushRange ops[] = {with_norms, {"b", 0, 1, b}};
  const std::vector<Part> parts = {DensePart(0, 0, "a", 1, {{0, 2, 0}}),
                                   DensePart(1, 0, "a", 1, {{2, 4, 2}}),
                                   DensePart(1, 1, "b", 1, {{0, 1, 0}})};
  RequestStamp stamp{7, 9, proto::CONSISTENCY_ASYNC, 0, proto::VALUES_F32};
  std::atomic<uint64_t> next_id{1};
  PushRequests out;
  BuildPushRequests(parts, ops, stamp, &next_id, &out);
  ASSERT_EQ(out.headers.size(), 3u);
  for (int i : {0, 1}) {
    ASSERT_TRUE(out.headers[i].has_layer_norms()) << i;
    EXPECT_EQ(out.headers[i].layer_norms().weight(), 3.0f);
    EXPECT_EQ(out.headers[i].layer_norms().gradient(), 4.0f);
  }
  EXPECT_FALSE(out.headers[2].has_layer_norms());
}

TEST(RequestCodecTest, SixteenBitPushesCarryTheirValuesEncoded) {
  const std::vector<float> a = {0.5f, -1.25f, 3.0f, 1024.0f};
  const PushRange op{"a", 0, 4, a};
  const std::vector<Part> parts = {DensePart(0, 0, "a", 1, {{0, 1, 0}, {2, 4, 2}})};
  for (proto::ValueEncoding encoding : {proto::VALUES_F16, proto::VALUES_BF16}) {
    std::atomic<uint64_t> next_id{1};
    PushRequests out;
    BuildPushRequests(parts, {&op, 1}, {1, 0, proto::CONSISTENCY_ASYNC, 0, encoding}, &next_id,
                      &out);
    EXPECT_EQ(out.headers[0].value_encoding(), encoding);
    ASSERT_EQ(out.pieces[0].size(), 1u);
    ASSERT_EQ(out.pieces[0][0].size(), 3 * BytesPerValue(encoding));
    EXPECT_EQ(out.pieces[0][0].data(), out.encoded[0].data());
    std::vector<float> decoded(3);
    DecodeValues(encoding, out.pieces[0][0].data(), 3, decoded.data());
    EXPECT_THAT(decoded, ElementsAre(0.5f, 3.0f, 1024.0f));
  }
}

TEST(RequestCodecTest, KeyPushesPackTheirKeysAndGatherTheirRowsWithoutConsistency) {
  const std::vector<uint64_t> keys = {5, 9, 2, 7};
  const std::vector<float> grads = {50, 51, 90, 91, 20, 21, 70, 71};  // width 2
  const std::vector<Part> parts = {KeyPart(0, 2, {2, 0}), KeyPart(1, 2, {3, 1})};
  std::atomic<uint64_t> next_id{40};
  PushRequests out;
  BuildKeyPushRequests(parts, keys, 2, grads, {4, 6, proto::CONSISTENCY_BOUNDED, 1}, &next_id,
                       &out);
  ASSERT_EQ(out.headers.size(), 2u);
  EXPECT_THAT(Unpack(out.headers[0].key_list()), ElementsAre(2, 5));
  EXPECT_THAT(Unpack(out.headers[1].key_list()), ElementsAre(7, 9));
  EXPECT_EQ(out.headers[1].request_id(), 41u);
  EXPECT_EQ(out.headers[0].worker_id(), 4u);
  EXPECT_EQ(out.headers[0].clock(), 6u);
  // Key lists take no part in bounded waits.
  EXPECT_EQ(out.headers[0].consistency(), proto::CONSISTENCY_ASYNC);
  EXPECT_EQ(out.headers[0].staleness(), 0u);
  EXPECT_THAT(out.gathered[0], ElementsAre(20, 21, 50, 51));
  EXPECT_THAT(out.gathered[1], ElementsAre(70, 71, 90, 91));
  EXPECT_EQ(out.pieces[1][0], Bytes(out.gathered[1]));
  std::string inline_values = "x";
  AppendPushValues(out.pieces[0], &inline_values);
  EXPECT_EQ(inline_values, "x" + Bytes({20, 21, 50, 51}));
}

TEST(RequestCodecTest, PullRequestsCarryTheStampAndEachPartsKeys) {
  const RequestStamp stamp{3, 12, proto::CONSISTENCY_BOUNDED, 1, proto::VALUES_F16};
  const std::vector<uint64_t> keys = {8, 6, 4};
  const std::vector<Part> parts = {DensePart(0, 0, "a", 1, {{0, 5, 0}}), KeyPart(1, 1, {2, 1})};
  const std::vector<proto::PullRequest> requests = BuildPullRequests(parts, stamp, keys);
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].table(), "a");
  EXPECT_EQ(requests[0].worker_id(), 3u);
  EXPECT_EQ(requests[0].clock(), 12u);
  EXPECT_EQ(requests[0].consistency(), proto::CONSISTENCY_BOUNDED);
  EXPECT_EQ(requests[0].staleness(), 1u);
  EXPECT_EQ(requests[0].value_encoding(), proto::VALUES_F16);
  ASSERT_EQ(requests[0].ranges_size(), 1);
  EXPECT_EQ(requests[0].ranges(0).end(), 5u);
  EXPECT_TRUE(requests[0].key_list().empty());
  // A key list: no clock, no consistency.
  EXPECT_EQ(requests[1].table(), "rows");
  EXPECT_EQ(requests[1].worker_id(), 3u);
  EXPECT_EQ(requests[1].value_encoding(), proto::VALUES_F16);
  EXPECT_EQ(requests[1].clock(), 0u);
  EXPECT_EQ(requests[1].consistency(), proto::CONSISTENCY_ASYNC);
  EXPECT_EQ(requests[1].staleness(), 0u);
  EXPECT_EQ(requests[1].ranges_size(), 0);
  EXPECT_THAT(Unpack(requests[1].key_list()), ElementsAre(4, 6));
}

TEST(RequestCodecTest, PulledValuesLandAtThePartsOffsets) {
  // Dense: keys [0, 2) and [5, 6) of width 2 at offsets 0 and 10.
  const Part dense = DensePart(0, 0, "a", 2, {{0, 2, 0}, {5, 6, 10}});
  std::vector<float> out(12, -1);
  const std::string wire = Bytes({1, 2, 3, 4, 5, 6});
  // Split in two segments, across a value.
  SegmentedBytes values;
  values.Append(absl::string_view(wire).substr(0, 6));
  values.Append(absl::string_view(wire).substr(6));
  ASSERT_TRUE(PullValuesInto(dense, out.data(), proto::VALUES_F32)(values).ok());
  EXPECT_THAT(out, ElementsAre(1, 2, 3, 4, -1, -1, -1, -1, -1, -1, 5, 6));

  const absl::Status short_reply =
      PullValuesInto(dense, out.data(), proto::VALUES_F32)(SegmentedBytes::Of(wire.substr(4)));
  EXPECT_EQ(short_reply.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(short_reply.message(), HasSubstr("expected 24"));

  // Key lists, 16-bit: rows go to their positions.
  const Part rows = KeyPart(0, 2, {2, 0});
  std::vector<float> by_key(6, -1);
  std::string encoded(4 * 2, '\0');
  EncodeValues(proto::VALUES_F16, std::vector<float>{20, 21, 0.5f, 1}, encoded.data());
  ASSERT_TRUE(
      PullValuesInto(rows, by_key.data(), proto::VALUES_F16)(SegmentedBytes::Of(encoded)).ok());
  EXPECT_THAT(by_key, ElementsAre(0.5f, 1, -1, -1, 20, 21));
}

TEST(RequestCodecTest, PushPullRequestsCarryTheirPartsPushesAndValuesInOrder) {
  const std::vector<float> a = {1, 2, 3, 4};
  const PushRange ops[] = {{"a", 0, 4, a}};
  const std::vector<Part> parts = {DensePart(0, 0, "a", 1, {{0, 1, 0}}),
                                   DensePart(1, 0, "a", 1, {{1, 2, 1}}),
                                   DensePart(0, 0, "a", 1, {{2, 4, 2}})};
  std::atomic<uint64_t> next_id{1};
  PushRequests pushes;
  BuildPushRequests(parts, ops, {}, &next_id, &pushes);
  PlannedCall call;
  call.server = 0;
  call.parts = {0, 2};
  proto::PushPullRequest request;
  std::vector<absl::string_view> pieces;
  BuildPushPullRequest(call, &pushes, &request, &pieces);
  ASSERT_EQ(request.pushes_size(), 2);
  EXPECT_EQ(request.pushes(0).request_id(), 1u);
  EXPECT_EQ(request.pushes(1).request_id(), 3u);
  EXPECT_EQ(request.pushes(0).values_bytes(), sizeof(float));
  EXPECT_EQ(request.pushes(1).values_bytes(), 2 * sizeof(float));
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[1].data(), reinterpret_cast<const char*>(a.data() + 2));

  // The reply: push 0 applied, push 1 refused (its values are passed over).
  proto::PushPullResponse reply;
  reply.add_results()->set_version(5);
  proto::PullResponse* refused = reply.add_results();
  refused->set_code(static_cast<int>(absl::StatusCode::kNotFound));
  refused->set_message("no table");
  std::vector<float> out(4, -1);
  float* const base = out.data();
  const std::string back = Bytes({10, 0, 0});
  ASSERT_TRUE(ScatterPushPullReply(parts, call, reply, SegmentedBytes::Of(back), {&base, 1},
                                   proto::VALUES_F32)
                  .ok());
  EXPECT_THAT(out, ElementsAre(10, -1, -1, -1));
  EXPECT_EQ(ScatterPushPullReply(parts, call, reply, SegmentedBytes::Of(back.substr(4)), {&base, 1},
                                 proto::VALUES_F32)
                .code(),
            absl::StatusCode::kInternal);
  proto::PushPullResponse one_result;
  one_result.add_results();
  EXPECT_THAT(ScatterPushPullReply(parts, call, one_result, SegmentedBytes::Of(back), {&base, 1},
                                   proto::VALUES_F32)
                  .message(),
              HasSubstr("1 results for 2 pushes"));

  // Each part's status and result.
  FakeTransport transport(2);
  std::vector<absl::Status> status(3);
  std::vector<proto::PullResponse> results(3);
  SplitPushPullReply(call, absl::OkStatus(), reply, transport, absl::MakeSpan(status),
                     absl::MakeSpan(results));
  EXPECT_TRUE(status[0].ok());
  EXPECT_EQ(results[0].version(), 5u);
  EXPECT_EQ(status[2].code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status[2].message(), "server 0 (fake): PushPull: no table");
  EXPECT_TRUE(status[1].ok()) << "part 1 is another call's";
  const absl::Status lost = absl::UnavailableError("down");
  SplitPushPullReply(call, lost, reply, transport, absl::MakeSpan(status), absl::MakeSpan(results));
  EXPECT_EQ(status[0], lost);
  EXPECT_EQ(status[2], lost);
}

TEST(RequestCodecTest, VersionsAndPullInfoTakeTheLargestPerOpAndServer) {
  const std::vector<Part> parts = {DensePart(1, 0, "a", 1, {{0, 1, 0}}),
                                   DensePart(1, 0, "a", 1, {{1, 2, 1}}),
                                   DensePart(0, 1, "b", 1, {{0, 1, 0}})};
  std::vector<proto::PullResponse> pulled(3);
  pulled[0].set_version(4);
  pulled[1].set_version(6);
  pulled[2].set_version(2);
  pulled[0].set_params_clock(9);
  pulled[1].set_params_clock(7);
  pulled[2].set_params_clock(8);
  pulled[1].set_wait_us(1500);
  PullInfo info;
  FillPullInfo(parts, pulled, /*num_ops=*/2, /*num_servers=*/2, &info);
  EXPECT_THAT(info.versions, ElementsAre(0, 6, 2, 0));  // op * 2 + server
  EXPECT_EQ(info.params_clock, 7u);
  EXPECT_EQ(info.waited, absl::Microseconds(1500));
  FillPullInfo(parts, pulled, 2, 2, nullptr);  // no info wanted: nothing to do

  std::vector<proto::PushResponse> pushed(3);
  pushed[0].set_version(11);
  pushed[1].set_version(10);
  pushed[2].set_version(3);
  Versions versions = {99};
  FillPushVersions(parts, pushed, 2, 2, &versions);
  EXPECT_THAT(versions, ElementsAre(0, 11, 3, 0));
}

}  // namespace
}  // namespace ps
