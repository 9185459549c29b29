// Traffic reduction through PsClient and real in-process gRPC shards
// (PS paper, section 4.2): 16-bit values on every data path, and key-list
// caching, including servers that no longer hold a list (the client sends
// it again; every update still applied exactly once).
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "common/value_encoding.h"
#include "gtest/gtest.h"
#include "tests/in_process_cluster.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace {

// The value a float becomes on the wire in `encoding`.
float Wire(proto::ValueEncoding encoding, float v) {
  if (encoding == proto::VALUES_F16) return HalfToFloat(FloatToHalf(v));
  if (encoding == proto::VALUES_BF16) return Bfloat16ToFloat(FloatToBfloat16(v));
  return v;
}

// Sums of the key-list-caching servers' counters.
struct KeyListCounts {
  uint64_t kept = 0, hits = 0, misses = 0;
};
KeyListCounts Counts(PsClient& client) {
  KeyListCounts c;
  auto stats = client.Stats();
  EXPECT_TRUE(stats.ok()) << stats.status();
  if (!stats.ok()) return c;
  for (const ServerStats& s : *stats) {
    c.kept += s.stats.key_lists_kept();
    c.hits += s.stats.key_list_hits();
    c.misses += s.stats.key_list_misses();
  }
  return c;
}

class EncodingTest : public ::testing::TestWithParam<proto::ValueEncoding> {};

// Every data path carries 16-bit values both ways: the servers apply the
// gradients as decoded and return their float32 values rounded.
TEST_P(EncodingTest, EveryDataPathRoundsValuesBothWays) {
  const proto::ValueEncoding e = GetParam();
  auto cluster = InProcessCluster::Start(3, {/*slice_size=*/5, 64});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  PsClientOptions options = (*cluster)->ClientOptions(1);
  options.value_encoding = e;
  options.max_values_per_request = 7;  // ranges cut across requests and servers
  auto client = PsClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  PsClient& c = **client;
  ASSERT_TRUE(c.CreateTable(SumTable("d", 40, 2)).ok());
  ASSERT_TRUE(c.CreateTable(SparseSumTable("s", 3)).ok());

  // Dense ranges: Push, then Pull.
  std::vector<float> grads(80);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = -0.1f * static_cast<float>(i) - 1e-3f;
  PushRange push{"d", 0, 40, grads};
  ASSERT_TRUE(c.Push({&push, 1}, 0).ok());
  std::vector<float> values(80);
  PullRange pull{"d", 0, 40, absl::MakeSpan(values)};
  ASSERT_TRUE(c.Pull({&pull, 1}).ok());
  for (size_t i = 0; i < values.size(); ++i) {
    // The table holds -wire(g) in float32; the pull rounds it again.
    ASSERT_EQ(values[i], Wire(e, -Wire(e, grads[i]))) << i;
  }
  // PushPull of ranges: the reply includes the push.
  std::vector<float> after(80);
  PullRange pull_after{"d", 0, 40, absl::MakeSpan(after)};
  ASSERT_TRUE(c.PushPull({&push, 1}, {&pull_after, 1}, 1).ok());
  for (size_t i = 0; i < after.size(); ++i) {
    ASSERT_EQ(after[i], Wire(e, -2 * Wire(e, grads[i]))) << i;
  }
  // Small async pushes go out batched (PushBatch) in the same encoding.
  std::vector<float> small = {-0.3f, -0.7f};
  PushRange one{"d", 39, 40, small};
  absl::BlockingCounter pending(8);
  for (int k = 0; k < 8; ++k) {
    c.PushAsync({&one, 1}, 2, [&pending](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      pending.DecrementCount();
    });
  }
  pending.Wait();
  std::vector<float> last(2);
  PullRange pull_last{"d", 39, 40, absl::MakeSpan(last)};
  ASSERT_TRUE(c.Pull({&pull_last, 1}).ok());
  EXPECT_EQ(last[0], Wire(e, -2 * Wire(e, grads[78]) - 8 * Wire(e, small[0])));

  // Sparse keys: PushKeys, PullKeys, PushPullKeys.
  const std::vector<uint64_t> keys = {5, 1ull << 63, 77, 123456789, 9};
  std::vector<float> key_grads(keys.size() * 3);
  for (size_t i = 0; i < key_grads.size(); ++i) key_grads[i] = 1000.5f - 3.3f * i;
  ASSERT_TRUE(c.PushKeys("s", keys, 3, key_grads, 0).ok());
  std::vector<float> rows(key_grads.size());
  ASSERT_TRUE(c.PullKeys("s", keys, 3, absl::MakeSpan(rows)).ok());
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i], Wire(e, -Wire(e, key_grads[i]))) << i;
  }
  ASSERT_TRUE(c.PushPullKeys("s", keys, 3, key_grads, absl::MakeSpan(rows), 1).ok());
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i], Wire(e, -2 * Wire(e, key_grads[i]))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Encodings, EncodingTest,
                         ::testing::Values(proto::VALUES_F16, proto::VALUES_BF16),
                         [](const auto& info) {
                           return std::string(ValueEncodingName(info.param));
                         });

// Clients with different encodings share a table: each gets what it asked.
TEST(EncodingTest, ClientsOfDifferentEncodingsShareATable) {
  auto cluster = InProcessCluster::Start(2, {/*slice_size=*/4, 64});
  ASSERT_TRUE(cluster.ok());
  PsClientOptions half = (*cluster)->ClientOptions(1);
  half.value_encoding = proto::VALUES_F16;
  auto a = PsClient::Connect(half);
  auto b = PsClient::Connect((*cluster)->ClientOptions(2));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->CreateTable(SumTable("t", 8, 1)).ok());
  std::vector<float> g(8, -1.0f / 3);
  PushRange push{"t", 0, 8, g};
  ASSERT_TRUE((*b)->Push({&push, 1}, 0).ok());  // float32: exactly 1/3
  std::vector<float> exact(8), rounded(8);
  PullRange pb{"t", 0, 8, absl::MakeSpan(exact)};
  PullRange pa{"t", 0, 8, absl::MakeSpan(rounded)};
  ASSERT_TRUE((*b)->Pull({&pb, 1}).ok());
  ASSERT_TRUE((*a)->Pull({&pa, 1}).ok());
  EXPECT_EQ(exact[3], 1.0f / 3);
  EXPECT_EQ(rounded[3], HalfToFloat(FloatToHalf(1.0f / 3)));
  EXPECT_NE(rounded[3], exact[3]);
}

// The push after a pull of the same keys names the list by its signature;
// the values are those of full lists.
TEST(KeyListCachingTest, RepeatedListsAreSentAsSignatures) {
  auto cluster = InProcessCluster::Start(2);
  ASSERT_TRUE(cluster.ok());
  PsClientOptions options = (*cluster)->ClientOptions(1);
  options.key_list_caching = true;
  auto client = PsClient::Connect(options);
  ASSERT_TRUE(client.ok());
  PsClient& c = **client;
  ASSERT_TRUE(c.CreateTable(SparseSumTable("s", 2)).ok());
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 200; ++k) keys.push_back(k * 7919 + 3);
  std::vector<float> rows(keys.size() * 2), grads(keys.size() * 2, -1.0f);
  const int kSteps = 5;
  for (int step = 0; step < kSteps; ++step) {
    ASSERT_TRUE(c.PullKeys("s", keys, 2, absl::MakeSpan(rows)).ok());
    for (float v : rows) ASSERT_EQ(v, static_cast<float>(step));
    ASSERT_TRUE(c.PushKeys("s", keys, 2, grads, step).ok());
  }
  const KeyListCounts counts = Counts(c);
  // One list per server, sent in full once; every later request by signature.
  EXPECT_EQ(counts.kept, 2u);
  EXPECT_EQ(counts.hits, 2u * (2 * kSteps - 1));
  EXPECT_EQ(counts.misses, 0u);
  // Short lists are sent as they are.
  const std::vector<uint64_t> few = {1, 2, 3};
  std::vector<float> few_rows(6);
  ASSERT_TRUE(c.PullKeys("s", few, 2, absl::MakeSpan(few_rows)).ok());
  ASSERT_TRUE(c.PullKeys("s", few, 2, absl::MakeSpan(few_rows)).ok());
  EXPECT_EQ(Counts(c).hits, counts.hits);
}

// Servers that keep no list (as after a restart, or with their cache full)
// miss every signature: the client sends the lists again, and every push is
// applied exactly once on every path.
TEST(KeyListCachingTest, MissedListsAreSentAgainAndAppliedOnce) {
  ServerLimits limits;
  limits.key_list_cache_bytes = 0;
  auto cluster = InProcessCluster::Start(2, {}, limits);
  ASSERT_TRUE(cluster.ok());
  PsClientOptions options = (*cluster)->ClientOptions(1);
  options.key_list_caching = true;
  options.pushpull_values_per_call = 64;  // several pushes per PushPull call
  auto client = PsClient::Connect(options);
  ASSERT_TRUE(client.ok());
  PsClient& c = **client;
  ASSERT_TRUE(c.CreateTable(SparseSumTable("s", 1)).ok());
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 300; ++k) keys.push_back(k * 104729 + 11);
  std::vector<float> grads(keys.size(), -1.0f), rows(keys.size());
  const int kSteps = 4;
  for (int step = 0; step < kSteps; ++step) {
    ASSERT_TRUE(c.PullKeys("s", keys, 1, absl::MakeSpan(rows)).ok());
    ASSERT_TRUE(c.PushKeys("s", keys, 1, grads, step).ok());
    ASSERT_TRUE(c.PushPullKeys("s", keys, 1, grads, absl::MakeSpan(rows), step).ok());
    for (float v : rows) ASSERT_EQ(v, 2.0f * (step + 1)) << "step " << step;
  }
  const KeyListCounts counts = Counts(c);
  EXPECT_EQ(counts.kept, 0u);
  EXPECT_EQ(counts.hits, 0u);
  EXPECT_GT(counts.misses, 0u) << "the client never sent a signature alone";
}

}  // namespace
}  // namespace ps
