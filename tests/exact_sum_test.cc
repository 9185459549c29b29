// No lost and no doubled updates: with SGD at learning rate 1 the servers sum
// the pushed values, so W workers each adding 1 to the same keys K times (a
// gradient of -1) must leave exactly W*K in every value.
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/in_process_cluster.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace {

constexpr int kWorkers = 4;
constexpr int kPushes = 150;

template <typename PushFn>
void RunWorkers(InProcessCluster& cluster, PushFn push) {
  std::vector<absl::Status> status(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      auto client = cluster.Connect(w);
      if (client == nullptr) return;
      for (int k = 0; k < kPushes && status[w].ok(); ++k) status[w] = push(*client, k);
    });
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w)
    ASSERT_TRUE(status[w].ok()) << "worker " << w << ": " << status[w];
}

TEST(ExactSumTest, DenseRangePushesSumExactly) {
  auto cluster = InProcessCluster::Start(3, {/*slice_size=*/64, 512});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  constexpr uint64_t kKeys = 5000;
  auto admin = (*cluster)->Connect(100);
  ASSERT_TRUE(admin->CreateTable(SumTable("sum", kKeys, 1)).ok());
  const std::vector<float> minus_one(kKeys, -1.0f);
  RunWorkers(**cluster, [&](PsClient& c, int) {
    PushRange op{"sum", 0, kKeys, minus_one};
    return c.Push({&op, 1}, 0);
  });
  std::vector<float> values(kKeys);
  PullRange pull{"sum", 0, kKeys, absl::MakeSpan(values)};
  ASSERT_TRUE(admin->Pull({&pull, 1}).ok());
  for (uint64_t k = 0; k < kKeys; ++k) {
    ASSERT_EQ(values[k], kWorkers * kPushes) << "key " << k;
  }
}

// The Downpour step over gRPC: one PushPull call per server for both tables.
TEST(ExactSumTest, PushPullOfTwoTablesSumsExactly) {
  auto cluster = InProcessCluster::Start(3, {/*slice_size=*/64, 512});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  constexpr uint64_t kKeys = 3000;
  auto admin = (*cluster)->Connect(100);
  ASSERT_TRUE(admin->CreateTable(SumTable("a", kKeys, 1)).ok());
  ASSERT_TRUE(admin->CreateTable(SumTable("b", 10, 1)).ok());
  const std::vector<float> minus_one(kKeys, -1.0f);
  RunWorkers(**cluster, [&](PsClient& c, int k) {
    std::vector<float> a(kKeys), b(10);
    const PushRange push[] = {{"a", 0, kKeys, minus_one},
                              {"b", 0, 10, absl::MakeConstSpan(minus_one).first(10)}};
    const PullRange pull[] = {{"a", 0, kKeys, absl::MakeSpan(a)}, {"b", 0, 10, absl::MakeSpan(b)}};
    absl::Status s = c.PushPull(push, pull, static_cast<uint64_t>(k));
    if (s.ok() && (a[0] < k + 1 || b[9] < k + 1)) {
      s = absl::InternalError("a PushPull read values without its own push");
    }
    return s;
  });
  std::vector<float> a(kKeys), b(10);
  const PullRange pull[] = {{"a", 0, kKeys, absl::MakeSpan(a)}, {"b", 0, 10, absl::MakeSpan(b)}};
  ASSERT_TRUE(admin->Pull(pull).ok());
  for (uint64_t k = 0; k < kKeys; ++k) ASSERT_EQ(a[k], kWorkers * kPushes) << "key " << k;
  for (float v : b) ASSERT_EQ(v, kWorkers * kPushes);
}

TEST(ExactSumTest, KeyListPushesOfWideRowsSumExactly) {
  auto cluster = InProcessCluster::Start(3, {/*slice_size=*/8, 512});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  constexpr uint32_t kWidth = 3;
  auto admin = (*cluster)->Connect(100);
  ASSERT_TRUE(admin->CreateTable(SumTable("rows", 1000, kWidth)).ok());
  // Scattered keys, one of them twice in the same push (applied twice).
  const std::vector<uint64_t> keys = {999, 0, 17, 512, 17, 300, 301, 8};
  const std::vector<float> minus_one(keys.size() * kWidth, -1.0f);
  RunWorkers(**cluster, [&](PsClient& c, int k) {
    return c.PushKeys("rows", keys, kWidth, minus_one, static_cast<uint64_t>(k));
  });
  std::vector<float> values(keys.size() * kWidth);
  ASSERT_TRUE(admin->PullKeys("rows", keys, kWidth, absl::MakeSpan(values)).ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    const float expected = (keys[i] == 17 ? 2 : 1) * kWorkers * kPushes;
    for (uint32_t j = 0; j < kWidth; ++j) {
      ASSERT_EQ(values[i * kWidth + j], expected) << "key " << keys[i] << " column " << j;
    }
  }
  // Keys never pushed stay zero.
  const std::vector<uint64_t> untouched = {1, 2, 511};
  std::vector<float> zeros(untouched.size() * kWidth, 7.0f);
  ASSERT_TRUE(admin->PullKeys("rows", untouched, kWidth, absl::MakeSpan(zeros)).ok());
  for (float v : zeros) EXPECT_EQ(v, 0.0f);
}

TEST(ExactSumTest, KeyListsOnASparseTableSumExactlyAndReadMissingKeysAsZero) {
  auto cluster = InProcessCluster::Start(3);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  constexpr uint32_t kWidth = 2;
  auto admin = (*cluster)->Connect(100);
  ASSERT_TRUE(admin->CreateTable(SparseSumTable("hashed", kWidth)).ok());
  // Hashed-looking ids over all of uint64, one listed twice; the workers did
  // not create the table: their clients learn its layout from a server.
  std::vector<uint64_t> keys = {0, ~uint64_t{0}, (uint64_t{1} << 63) + 17, 42, 42};
  for (uint64_t k = 1; k <= 200; ++k) keys.push_back(k * 0x9e3779b97f4a7c15ULL);
  const std::vector<float> minus_one(keys.size() * kWidth, -1.0f);
  RunWorkers(**cluster, [&](PsClient& c, int k) {
    if (k % 2 == 0) return c.PushKeys("hashed", keys, kWidth, minus_one, static_cast<uint64_t>(k));
    std::vector<float> out(keys.size() * kWidth);
    absl::Status s = c.PushPullKeys("hashed", keys, kWidth, minus_one, absl::MakeSpan(out), k);
    if (s.ok() && out[0] < 1) s = absl::InternalError("a PushPull read without its own push");
    return s;
  });
  std::vector<float> values(keys.size() * kWidth);
  ASSERT_TRUE(admin->PullKeys("hashed", keys, kWidth, absl::MakeSpan(values)).ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    const float expected = (keys[i] == 42 ? 2 : 1) * kWorkers * kPushes;
    ASSERT_EQ(values[i * kWidth], expected) << "key " << keys[i];
    ASSERT_EQ(values[i * kWidth + 1], expected) << "key " << keys[i];
  }
  // The servers' statistics count one row per distinct key, all admitted.
  auto stats = admin->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  uint64_t rows = 0, admitted = 0;
  for (const ServerStats& server : *stats) {
    for (const proto::TableStats& t : server.stats.tables()) {
      if (t.table() != "hashed") continue;
      rows += t.rows();
      admitted += t.admitted();
    }
  }
  EXPECT_EQ(rows, keys.size() - 1);  // 42 is listed twice
  EXPECT_EQ(admitted, rows);
  // Keys never pushed read as their initial values (zeros) and create no row.
  const std::vector<uint64_t> untouched = {1, 2, uint64_t{1} << 62};
  std::vector<float> zeros(untouched.size() * kWidth, 7.0f);
  ASSERT_TRUE(admin->PullKeys("hashed", untouched, kWidth, absl::MakeSpan(zeros)).ok());
  for (float v : zeros) EXPECT_EQ(v, 0.0f);
  // Ranges are refused on a sparse table.
  std::vector<float> range(4);
  const PullRange pull{"hashed", 0, 2, absl::MakeSpan(range)};
  const absl::Status refused = admin->Pull({&pull, 1});
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("is sparse: it takes key lists"), absl::string_view::npos)
      << refused;
}

TEST(ExactSumTest, SmallPushesFromThreadsSharingOneClientAreBatchedExactly) {
  // One server and one slice, so each push is a single small request and
  // concurrent ones are sent together in PushBatch calls.
  auto cluster = InProcessCluster::Start(1);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = (*cluster)->Connect(0);
  constexpr uint64_t kKeys = 1024;
  constexpr int kThreads = 8, kEach = 200;
  ASSERT_TRUE(client->CreateTable(SumTable("small", kKeys, 1)).ok());
  const std::vector<float> minus_one(kKeys, -1.0f);
  std::vector<absl::Status> status(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kEach && status[t].ok(); ++k) {
        PushRange op{"small", 0, kKeys, minus_one};
        status[t] = client->Push({&op, 1}, 0);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t)
    ASSERT_TRUE(status[t].ok()) << "thread " << t << ": " << status[t];
  std::vector<float> values(kKeys);
  PullRange pull{"small", 0, kKeys, absl::MakeSpan(values)};
  ASSERT_TRUE(client->Pull({&pull, 1}).ok());
  for (uint64_t k = 0; k < kKeys; ++k) ASSERT_EQ(values[k], kThreads * kEach) << "key " << k;
}

TEST(ExactSumTest, AsyncPushesKeptInFlightByOneThreadApplyExactly) {
  // Over gRPC to two servers: small one-part pushes (batched) alternate with
  // pushes of every key (one part per server), 16 in flight from one thread.
  auto cluster = InProcessCluster::Start(2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = (*cluster)->Connect(0);
  constexpr uint64_t kKeys = 1 << 14, kSmall = 512;
  constexpr int kPushes = 400, kWindow = 16;
  ASSERT_TRUE(client->CreateTable(SumTable("async", kKeys, 1)).ok());
  const std::vector<float> minus_one(kKeys, -1.0f);
  absl::Mutex mu;
  int in_flight = 0, failed = 0;
  absl::Status first_error;
  for (int k = 0; k < kPushes; ++k) {
    {
      absl::MutexLock lock(&mu);
      auto room = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return in_flight < kWindow; };
      mu.Await(absl::Condition(&room));
      ++in_flight;
    }
    const uint64_t end = k % 2 == 0 ? kSmall : kKeys;
    PushRange op{"async", 0, end, absl::MakeConstSpan(minus_one.data(), end)};
    client->PushAsync({&op, 1}, 0, [&](absl::Status s) {
      absl::MutexLock lock(&mu);
      if (!s.ok() && failed++ == 0) first_error = s;
      --in_flight;
    });
  }
  {
    absl::MutexLock lock(&mu);
    auto none = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return in_flight == 0; };
    mu.Await(absl::Condition(&none));
    ASSERT_EQ(failed, 0) << first_error;
  }
  std::vector<float> values(kKeys);
  PullRange pull{"async", 0, kKeys, absl::MakeSpan(values)};
  ASSERT_TRUE(client->Pull({&pull, 1}).ok());
  for (uint64_t k = 0; k < kKeys; ++k) {
    ASSERT_EQ(values[k], k < kSmall ? kPushes : kPushes / 2) << "key " << k;
  }
}

}  // namespace
}  // namespace ps
