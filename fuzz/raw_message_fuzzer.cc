// Fuzzes the server's decoding of raw data-path requests, as PsService does
// it (server/ps_service.cc ParseRaw, then server/request_args.h): the
// message bytes, split into 1..4 grpc::Slices, go through SplitMessage
// (common/raw_message.h) with the server's raw field numbers
// (common/protocol.h); the header is parsed as the request proto and the
// key list and values (float32 or 16-bit, common/value_encoding.h) decoded.
// No server, no threads.
//
// Input: a mode byte, a slice-count byte, three 16-bit cut positions (little
// endian), then the serialized request.
//   mode % 4 = 0  Push      (raw fields key_list, values)
//              1  Pull      (raw field key_list)
//              2  PushPull  (raw field values; each push's values are the
//                            next values_bytes of it, as PsCore::PushPullMany
//                            splits them)
//              3  Push with every field in the proto (DecodePush(request),
//                 the PushBatch path), the slices ignored
//   mode bit 2    decode with a key-list cache (signatures may hit); else
//                 with none
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/protocol.h"
#include "common/raw_message.h"
#include "fuzz/fuzz_util.h"
#include "server/core/key_list_cache.h"
#include "server/core/request_args.h"

namespace {

// Reads every key and value the decoded request views, so AddressSanitizer
// checks that the views are in bounds.
uint64_t Touch(const ps::KeySpec& keys) {
  uint64_t sum = 0;
  if (keys.is_list) {
    for (uint64_t k : keys.keys) sum += k;
  } else {
    for (const ps::KeySpec::Range& r : keys.ranges) sum += r.end - r.begin;
  }
  return sum;
}
uint64_t Touch(const ps::PushArgs& args) {
  if (args.clock_only) return 0;
  uint64_t sum = Touch(args.keys);
  for (float v : args.values) sum += static_cast<uint64_t>(v == 0.0f);
  return sum;
}

void CheckSegments(const ps::SegmentedBytes& b) {
  size_t total = 0;
  for (absl::string_view p : b.pieces()) total += p.size();
  FUZZ_CHECK(total == b.size());
  if (b.empty()) return;
  std::string flat;
  const absl::string_view view = b.Flatten(&flat);
  FUZZ_CHECK(view.size() == b.size());
  // Sub and CopyOut agree with the flattened bytes.
  const size_t off = b.size() / 3, n = b.size() - off - b.size() / 4;
  std::string copy(n, '\0');
  b.CopyOut(off, n, copy.data());
  FUZZ_CHECK(copy == view.substr(off, n));
  std::string sub_flat;
  FUZZ_CHECK(b.Sub(off, n).Flatten(&sub_flat) == view.substr(off, n));
}

// Each mode: parses the slices as that message; 0 when they are not one,
// else what was decoded, touched.
uint64_t FuzzRawPush(const std::vector<grpc::Slice>& slices, ps::KeyListCache* key_lists) {
  ps::SplitFields fields;
  if (!ps::SplitMessage(slices, {ps::kPushKeyListField, ps::kPushValuesField}, &fields).ok()) {
    return 0;
  }
  CheckSegments(fields.Raw(ps::kPushKeyListField));
  CheckSegments(fields.Raw(ps::kPushValuesField));
  ps::proto::PushRequest header;
  if (!header.ParseFromString(fields.header)) return 0;
  // With a cache, a list whose signature matches is kept; the second round
  // sends the signature alone and takes the list from the cache.
  const ps::SegmentedBytes no_keys;
  uint64_t sink = 0;
  for (int round = 0; round < (key_lists ? 2 : 1); ++round) {
    ps::PushArgs args;
    absl::Status s = ps::DecodePush(header,
                                    round == 0 || header.key_list_signature() == 0
                                        ? fields.Raw(ps::kPushKeyListField)
                                        : no_keys,
                                    fields.Raw(ps::kPushValuesField), key_lists, &args);
    ps_fuzz::Note("DecodePush (raw)", s);
    if (s.ok()) sink += Touch(args);
  }
  return sink;
}

uint64_t FuzzRawPull(const std::vector<grpc::Slice>& slices, ps::KeyListCache* key_lists) {
  ps::SplitFields fields;
  if (!ps::SplitMessage(slices, {ps::kPullKeyListField}, &fields).ok()) return 0;
  CheckSegments(fields.Raw(ps::kPullKeyListField));
  ps::proto::PullRequest header;
  if (!header.ParseFromString(fields.header)) return 0;
  ps::PullArgs args;
  absl::Status s = ps::DecodePull(header, fields.Raw(ps::kPullKeyListField), key_lists, &args);
  ps_fuzz::Note("DecodePull (raw)", s);
  return s.ok() ? Touch(args.keys) : 0;
}

uint64_t FuzzRawPushPull(const std::vector<grpc::Slice>& slices, ps::KeyListCache* key_lists) {
  ps::SplitFields fields;
  if (!ps::SplitMessage(slices, {ps::kPushPullValuesField}, &fields).ok()) return 0;
  const ps::SegmentedBytes& values = fields.Raw(ps::kPushPullValuesField);
  CheckSegments(values);
  ps::proto::PushPullRequest header;
  if (!header.ParseFromString(fields.header)) return 0;
  uint64_t total = 0;
  for (const ps::proto::PushRequest& push : header.pushes()) {
    if (push.values_bytes() > values.size() - std::min<uint64_t>(total, values.size())) return 0;
    total += push.values_bytes();
  }
  if (total != values.size()) return 0;
  uint64_t offset = 0, sink = 0;
  for (const ps::proto::PushRequest& push : header.pushes()) {
    ps::PushArgs args;
    absl::Status s = ps::DecodePush(push, ps::SegmentedBytes::Of(push.key_list()),
                                    values.Sub(offset, push.values_bytes()), key_lists, &args);
    ps_fuzz::Note("DecodePush (PushPull)", s);
    if (s.ok()) sink += Touch(args);
    offset += push.values_bytes();
  }
  return sink;
}

uint64_t FuzzPushInProto(absl::string_view message, ps::KeyListCache* key_lists) {
  ps::proto::PushRequest request;
  if (!request.ParseFromArray(message.data(), static_cast<int>(message.size()))) return 0;
  ps::PushArgs args;
  absl::Status s = ps::DecodePush(request, key_lists, &args);
  ps_fuzz::Note("DecodePush (in proto)", s);
  return s.ok() ? Touch(args) : 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > ps_fuzz::kMaxInputBytes) return 0;
  ps_fuzz::Input in(data, size);
  const uint8_t mode = in.Byte();
  const int num_slices = 1 + in.Byte() % 4;
  size_t cuts[3] = {in.U16(), in.U16(), in.U16()};
  const absl::string_view message = in.Rest();
  for (size_t& c : cuts) c %= message.size() + 1;
  std::sort(cuts, cuts + num_slices - 1);

  std::vector<grpc::Slice> slices;
  size_t begin = 0;
  for (int i = 0; i < num_slices; ++i) {
    const size_t end = i + 1 < num_slices ? cuts[i] : message.size();
    slices.emplace_back(message.data() + begin, end - begin);
    begin = end;
  }

  ps::KeyListCache cache(1 << 20);
  ps::KeyListCache* const key_lists = (mode & 4) ? &cache : nullptr;
  uint64_t sink = 0;
  switch (mode % 4) {
    case 0:
      sink = FuzzRawPush(slices, key_lists);
      break;
    case 1:
      sink = FuzzRawPull(slices, key_lists);
      break;
    case 2:
      sink = FuzzRawPushPull(slices, key_lists);
      break;
    case 3:
      sink = FuzzPushInProto(message, key_lists);
      break;
  }
  (void)sink;
  return 0;
}
