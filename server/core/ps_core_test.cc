// The transport-free core, driven directly: limits, the protocol's
// invariants (at-most-once pushes, clock-only pushes included; one process
// per worker id; no state for unknown tables; cancellation of parked calls),
// on a fake clock.
#include "server/core/ps_core.h"

#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/value_encoding.h"
#include "common/wire.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/ps_core_fixture.h"
#include "server/core/ps_core_test_peer.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// The fixture: server/core/ps_core_fixture.h.

TEST_F(PsCoreTest, RetriedPushIsAppliedOnce) {
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("w", 4, 1))).ok());
  auto first = Push(OnePush("w", 0, -1, 42));
  auto retry = Push(OnePush("w", 0, -1, 42));
  ASSERT_TRUE(first.ok() && retry.ok());
  EXPECT_FALSE(first->duplicate());
  EXPECT_TRUE(retry->duplicate());
  std::string values;
  ASSERT_TRUE(PsCoreTestPeer::store(*core_).Pull("w", KeySpec::Single(0, 1), &values).ok());
  float v;
  std::memcpy(&v, values.data(), sizeof v);
  EXPECT_EQ(v, 1.0f);
  EXPECT_EQ(core_->apply_seconds().Read().cumulative.back(), 1u)
      << "one apply timed: the duplicate applied nothing";
}

// A clock-only push (no keys) advances the worker's clock; retried, it must
// count once, or a round of two parts would complete after one.
TEST_F(PsCoreTest, RetriedClockOnlyPushCountsOnce) {
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("w", 4, 1))).ok());
  ASSERT_TRUE(Heartbeat(1, 7).ok());
  proto::PushRequest clock_only;
  clock_only.set_table("w");
  clock_only.set_worker_id(1);
  clock_only.set_clock(0);
  clock_only.set_round_parts(2);
  clock_only.set_request_id(100);
  ASSERT_TRUE(Push(clock_only).ok());
  auto again = Push(clock_only);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate());
  EXPECT_EQ(PsCoreTestPeer::clocks(*core_).ServerClock("w"), 0u)
      << "one of two parts is in: round 0 is open";
  clock_only.set_request_id(101);
  ASSERT_TRUE(Push(clock_only).ok());
  EXPECT_EQ(PsCoreTestPeer::clocks(*core_).ServerClock("w"), 1u);
}

TEST_F(PsCoreTest, UnknownTableLeavesNoStateBehind) {
  ASSERT_TRUE(Heartbeat(1, 7).ok());
  proto::PushRequest push = OnePush("nope", 0, 1, 5);
  push.set_consistency(proto::CONSISTENCY_BOUNDED);
  EXPECT_EQ(Push(push).status().code(), absl::StatusCode::kNotFound);
  proto::PushRequest clock_only;
  clock_only.set_table("nope");
  clock_only.set_request_id(6);
  EXPECT_EQ(Push(clock_only).status().code(), absl::StatusCode::kNotFound);
  proto::PullRequest pull;
  pull.set_table("nope");
  pull.set_clock(3);
  pull.set_consistency(proto::CONSISTENCY_BOUNDED);
  pull.add_ranges()->set_end(1);
  PullArgs args;
  ASSERT_TRUE(DecodePull(pull, &core_->key_lists(), &args).ok());
  PullResult result;
  EXPECT_EQ(StartPull(&args, &result), 0u) << "never parked";
  ASSERT_TRUE(result.reply.has_value());
  EXPECT_EQ(result.reply->status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(PsCoreTestPeer::clocks(*core_).num_tables(), 0u);
  EXPECT_EQ(PsCoreTestPeer::clocks(*core_).parked(), 0u);
  EXPECT_EQ(core_->Stats().tables_size(), 0);
  EXPECT_EQ(core_->bytes_used(), 0u);
  // Its request ids were not recorded: the same id applies once the table exists.
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("nope", 4, 1))).ok());
  auto applied = Push(OnePush("nope", 0, 1, 5));
  ASSERT_TRUE(applied.ok());
  EXPECT_FALSE(applied->duplicate());
}

TEST_F(PsCoreTest, SecondProcessWithTheSameWorkerIdIsRefusedUntilTheLeaseExpires) {
  ASSERT_TRUE(Heartbeat(3, /*incarnation=*/111).ok());
  ASSERT_TRUE(Heartbeat(3, 111).ok()) << "renewal by the same process";
  auto second = Heartbeat(3, 222);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(second.status().message(), HasSubstr("worker id 3"));
  EXPECT_THAT(second.status().message(), HasSubstr("incarnation 111"));
  // The second process leaving must not drop the first.
  proto::HeartbeatRequest leave;
  leave.set_worker_id(3);
  leave.set_incarnation(222);
  leave.set_leaving(true);
  ASSERT_TRUE(core_->Heartbeat(leave).ok());
  auto live = Heartbeat(4, 444);
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(live->live_workers(), 2u);
  // The first process dies: once its lease expires, a restart is accepted.
  clock_.Advance(absl::Milliseconds(1001));
  core_->Tick();
  auto restarted = Heartbeat(3, 333);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
}

TEST_F(PsCoreTest, ParkedPullIsReleasedAtOnceWhenCancelled) {
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("w", 4, 1))).ok());
  ASSERT_TRUE(Heartbeat(1, 1).ok());
  ASSERT_TRUE(Heartbeat(2, 2).ok());
  PullArgs args = PullThatWaits();
  PullResult result;
  const PsCore::CallId id = StartPull(&args, &result);
  ASSERT_NE(id, 0u);
  EXPECT_FALSE(result.reply.has_value());
  EXPECT_EQ(PsCoreTestPeer::clocks(*core_).parked(), 1u);
  core_->Cancel(id);
  ASSERT_TRUE(result.reply.has_value());
  EXPECT_EQ(result.reply->status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(PsCoreTestPeer::clocks(*core_).parked(), 0u);
  core_->Cancel(id);  // a second cancel is a no-op
}

TEST_F(PsCoreTest, ParkedCallsAreCapped) {
  ServerLimits limits;
  limits.max_parked_calls = 2;
  Reset(limits);
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("w", 4, 1))).ok());
  ASSERT_TRUE(Heartbeat(1, 1).ok());
  ASSERT_TRUE(Heartbeat(2, 2).ok());
  PullArgs args = PullThatWaits();
  PullResult a, b, c;
  EXPECT_NE(StartPull(&args, &a), 0u);
  EXPECT_NE(StartPull(&args, &b), 0u);
  EXPECT_EQ(StartPull(&args, &c), 0u);
  ASSERT_TRUE(c.reply.has_value());
  EXPECT_EQ(c.reply->status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(c.reply->status().message(), HasSubstr("--max_parked_calls"));
  EXPECT_THAT(c.reply->status().message(), HasSubstr("2 calls already wait"));
  core_->Close(absl::UnavailableError("test over"));
  EXPECT_EQ(a.reply->status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(PsCoreTest, ParkedBspPushFailsAtItsDeadlineOnTheInjectedClock) {
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("w", 4, 1))).ok());
  ASSERT_TRUE(Heartbeat(1, 1, 60'000).ok());
  ASSERT_TRUE(Heartbeat(2, 2, 60'000).ok());
  // Worker 1 has read round 0; worker 2 has not.
  proto::PullRequest read;
  read.set_table("w");
  read.set_worker_id(1);
  read.add_ranges()->set_end(1);
  PullArgs read_args;
  ASSERT_TRUE(DecodePull(read, &core_->key_lists(), &read_args).ok());
  PullResult read_result;
  StartPull(&read_args, &read_result);
  ASSERT_TRUE(read_result.reply.has_value() && read_result.reply->ok());
  proto::PushRequest push = OnePush("w", 0, 1, 9);
  push.set_consistency(proto::CONSISTENCY_BOUNDED);  // staleness 0: BSP
  PushArgs args;
  ASSERT_TRUE(DecodePush(push, &core_->key_lists(), &args).ok());
  std::optional<absl::StatusOr<proto::PushResponse>> result;
  ASSERT_NE(core_->Push(&args, clock_.Now() + absl::Seconds(2),
                        [&result](absl::StatusOr<proto::PushResponse> r) { result = r; }),
            0u);
  core_->Tick();
  EXPECT_FALSE(result.has_value());
  clock_.Advance(absl::Seconds(3));
  core_->Tick();
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(result->status().message(), HasSubstr("slowest live worker is 2"));
}

TEST_F(PsCoreTest, RequestLimitsNameTheLimitAndTheFlag) {
  ServerLimits limits;
  limits.max_keys_per_request = 8;
  limits.max_message_bytes = 16;
  limits.max_table_name_bytes = 10;
  limits.max_lease = absl::Seconds(30);
  limits.max_clock = 1000;
  Reset(limits);
  auto long_name =
      core_->CreateTable(CreateTableRequestFor(SumTable("a_very_long_table_name", 4, 1)));
  EXPECT_EQ(long_name.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(long_name.status().message(), HasSubstr("--max_table_name_bytes"));
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("w", 100, 1))).ok());

  proto::PushRequest many;
  many.set_table("w");
  many.add_ranges()->set_end(9);
  many.set_values(std::string(9 * sizeof(float), '\0'));
  auto too_many = Push(many);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_many.status().message(), HasSubstr("9 keys, over the limit of 8"));
  EXPECT_THAT(too_many.status().message(), HasSubstr("--max_keys_per_request"));

  proto::PushRequest big = many;
  big.mutable_ranges(0)->set_end(5);
  big.set_values(std::string(5 * sizeof(float), '\0'));
  auto too_big = Push(big);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(too_big.status().message(), HasSubstr("20 bytes"));
  EXPECT_THAT(too_big.status().message(), HasSubstr("--max_message_mb"));

  proto::PushRequest late = OnePush("w", 0, 1, 1);
  late.set_clock(1000);
  auto clock = Push(late);
  EXPECT_EQ(clock.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(clock.status().message(), HasSubstr("--max_clock"));
  late.set_clock(~uint64_t{0});
  EXPECT_EQ(Push(late).status().code(), absl::StatusCode::kInvalidArgument) << "no wrap-around";

  auto lease = Heartbeat(1, 1, /*lease_ms=*/31'000);
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(lease.status().message(), HasSubstr("--max_lease_seconds"));
  proto::HeartbeatRequest far;
  far.set_worker_id(1);
  far.set_clock(5000);
  EXPECT_EQ(core_->Heartbeat(far).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PsCoreTestPeer::clocks(*core_).num_tables(), 0u);
  std::string values;
  ASSERT_TRUE(PsCoreTestPeer::store(*core_).Pull("w", KeySpec::Single(0, 9), &values).ok());
  EXPECT_EQ(values, std::string(9 * sizeof(float), '\0')) << "refused pushes changed nothing";
}

TEST_F(PsCoreTest, TablesPastTheBudgetOrCapAreRefused) {
  ServerLimits limits;
  limits.memory_budget_bytes = 1 << 20;
  limits.max_tables = 2;
  Reset(limits);
  auto big = core_->CreateTable(CreateTableRequestFor(SumTable("big", 1 << 20, 1)));
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("table 'big' needs 4229120 bytes"));
  EXPECT_THAT(big.status().message(), HasSubstr("1048576 of the memory budget"));
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("a", 10, 1))).ok());
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("b", 10, 1))).ok());
  EXPECT_EQ(core_->CreateTable(CreateTableRequestFor(SumTable("c", 10, 1))).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(PsCoreTest, BatchedPushesAreDeduplicatedAndValidatedOneByOne) {
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("w", 4, 1))).ok());
  proto::PushBatchRequest batch;
  *batch.add_pushes() = OnePush("w", 1, -1, 10);
  *batch.add_pushes() = OnePush("w", 1, -1, 10);     // the same id again
  *batch.add_pushes() = OnePush("nope", 1, -1, 11);  // unknown table
  proto::PushBatchResponse reply = core_->PushBatch(batch);
  ASSERT_EQ(reply.results_size(), 3);
  EXPECT_EQ(reply.results(0).code(), 0);
  EXPECT_FALSE(reply.results(0).duplicate());
  EXPECT_TRUE(reply.results(1).duplicate());
  EXPECT_EQ(reply.results(2).code(), static_cast<int>(absl::StatusCode::kNotFound));
}

// The PushPull RPC's core: each push applied once and read back; a failed
// push fails alone and leaves zeros; values that do not add up are refused.
TEST_F(PsCoreTest, PushPullAppliesEachPushThenReadsItBack) {
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("w", 4, 1))).ok());
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("v", 2, 1))).ok());
  proto::PushPullRequest request;
  std::string values;
  auto add = [&](proto::PushRequest push) {
    push.set_values_bytes(push.values().size());
    values += push.values();
    push.clear_values();
    *request.add_pushes() = std::move(push);
  };
  add(OnePush("w", 1, -2, 50));
  add(OnePush("nope", 0, -1, 51));
  add(OnePush("v", 0, -3, 52));
  SegmentedBytes in;
  in.Append(values);
  std::string out;
  auto allocate = [&out](size_t n) {
    out.assign(n, '\x7f');
    return out.data();
  };
  auto reply = core_->PushPullMany(request, in, allocate);
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_EQ(reply->results_size(), 3);
  EXPECT_EQ(reply->results(0).code(), 0);
  EXPECT_EQ(reply->results(1).code(), static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_THAT(reply->results(1).message(), HasSubstr("'nope'"));
  EXPECT_EQ(reply->results(2).code(), 0);
  std::vector<float> read(3);
  ASSERT_EQ(out.size(), read.size() * sizeof(float));
  std::memcpy(read.data(), out.data(), out.size());
  EXPECT_EQ(read, (std::vector<float>{2, 0, 3})) << "values after each push; zeros for the failed";
  // The same request again (a retry): duplicates, not applied twice.
  auto again = core_->PushPullMany(request, in, allocate);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->results(0).duplicate());
  std::memcpy(read.data(), out.data(), out.size());
  EXPECT_EQ(read, (std::vector<float>{2, 0, 3}));
  // Values that do not add up to the pushes' values_bytes.
  request.mutable_pushes(0)->set_values_bytes(8);
  EXPECT_EQ(core_->PushPullMany(request, in, allocate).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Bounded consistency waits between a push and its pull: refused.
  proto::PushPullRequest bounded;
  proto::PushRequest push = OnePush("w", 1, -1, 60);
  push.set_consistency(proto::CONSISTENCY_BOUNDED);
  push.set_staleness(2);
  push.set_values_bytes(sizeof(float));
  push.clear_values();
  *bounded.add_pushes() = push;
  const float g = -1;
  SegmentedBytes one;
  const std::string gbytes(reinterpret_cast<const char*>(&g), sizeof g);
  one.Append(gbytes);
  auto refused = core_->PushPullMany(bounded, one, allocate);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->results(0).code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
}

// 16-bit values of `v` in encoding e.
std::string Encode(proto::ValueEncoding e, const std::vector<float>& v) {
  std::string bytes(v.size() * BytesPerValue(e), '\0');
  EncodeValues(e, v, bytes.data());
  return bytes;
}

// A pull of keys [begin, end) of `table` in `encoding`.
proto::PullRequest RangePull(const std::string& table, uint64_t begin, uint64_t end,
                             proto::ValueEncoding encoding = proto::VALUES_F32) {
  proto::PullRequest pull;
  pull.set_table(table);
  proto::KeyRange* r = pull.add_ranges();
  r->set_begin(begin);
  r->set_end(end);
  pull.set_value_encoding(encoding);
  return pull;
}

// 16-bit values: decoded before the apply, encoded after the read.
TEST_F(PsCoreTest, SixteenBitValuesAreDecodedAndEncoded) {
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("w", 4, 1))).ok());
  proto::PushRequest push = OnePush("w", 0, 0, 70);
  push.mutable_ranges(0)->set_end(2);
  push.set_value_encoding(proto::VALUES_F16);
  push.set_values(Encode(proto::VALUES_F16, {-0.1f, -2.5f}));
  ASSERT_TRUE(Push(push).ok());
  // The table holds the decoded halves, in float32.
  PullArgs args;
  ASSERT_TRUE(DecodePull(RangePull("w", 0, 2), &core_->key_lists(), &args).ok());
  PullResult f32;
  StartPull(&args, &f32);
  ASSERT_TRUE(f32.reply->ok());
  std::vector<float> read(2);
  ASSERT_EQ(f32.values.size(), 8u);
  std::memcpy(read.data(), f32.values.data(), 8);
  EXPECT_EQ(read, (std::vector<float>{HalfToFloat(FloatToHalf(0.1f)), 2.5f}));
  // A bfloat16 pull: 2 bytes per value, the float32 values rounded.
  PullArgs bf16_args;
  ASSERT_TRUE(
      DecodePull(RangePull("w", 0, 2, proto::VALUES_BF16), &core_->key_lists(), &bf16_args).ok());
  PullResult bf16;
  StartPull(&bf16_args, &bf16);
  ASSERT_TRUE(bf16.reply->ok());
  ASSERT_EQ(bf16.values.size(), 4u);
  std::vector<float> decoded(2);
  DecodeValues(proto::VALUES_BF16, bf16.values.data(), 2, decoded.data());
  EXPECT_EQ(decoded[0], Bfloat16ToFloat(FloatToBfloat16(read[0])));
  EXPECT_EQ(decoded[1], 2.5f);
}

// In a PushPull the values read back use the push's encoding and fill
// exactly the push's bytes.
TEST_F(PsCoreTest, PushPullRepliesInThePushsEncoding) {
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("w", 4, 1))).ok());
  proto::PushPullRequest request;
  proto::PushRequest pp = OnePush("w", 3, 0, 71);
  pp.set_value_encoding(proto::VALUES_F16);
  const std::string values = Encode(proto::VALUES_F16, {-1.5f});
  pp.set_values_bytes(values.size());
  pp.clear_values();
  *request.add_pushes() = pp;
  SegmentedBytes in;
  in.Append(values);
  std::string out;
  auto reply = core_->PushPullMany(request, in, [&out](size_t n) {
    out.assign(n, '\x7f');
    return out.data();
  });
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_EQ(reply->results(0).code(), 0) << reply->results(0).message();
  ASSERT_EQ(out.size(), 2u);
  float back;
  DecodeValues(proto::VALUES_F16, out.data(), 1, &back);
  EXPECT_EQ(back, 1.5f);
}

// Unknown encodings and ragged bytes are refused, unapplied.
TEST_F(PsCoreTest, UnknownEncodingsAndRaggedValuesAreRefusedUnapplied) {
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("w", 4, 1))).ok());
  proto::PushRequest unknown = OnePush("w", 2, -1, 72);
  unknown.set_value_encoding(static_cast<proto::ValueEncoding>(9));
  absl::StatusOr<proto::PushResponse> refused = Push(unknown);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("push to table 'w' has value_encoding 9"));
  proto::PushRequest ragged = OnePush("w", 2, 0, 73);
  ragged.set_value_encoding(proto::VALUES_BF16);
  ragged.set_values("abc");
  refused = Push(ragged);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("3 bytes of 16-bit values"));
  PullArgs bad_pull;
  ASSERT_TRUE(DecodePull(RangePull("w", 0, 2, static_cast<proto::ValueEncoding>(5)),
                         &core_->key_lists(), &bad_pull)
                  .ok());
  PullResult bad;
  StartPull(&bad_pull, &bad);
  EXPECT_THAT(bad.reply->status().message(), HasSubstr("pull of table 'w' has value_encoding 5"));
  PullArgs key2_args;
  ASSERT_TRUE(DecodePull(RangePull("w", 2, 3), &core_->key_lists(), &key2_args).ok());
  PullResult untouched;
  StartPull(&key2_args, &untouched);
  ASSERT_TRUE(untouched.reply->ok());
  float key2;
  std::memcpy(&key2, untouched.values.data(), 4);
  EXPECT_EQ(key2, 0.0f) << "refused pushes changed key 2";
}

}  // namespace
}  // namespace ps
