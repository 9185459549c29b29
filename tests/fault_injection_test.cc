// Exactly-once under faults, with PsClient over an in-memory transport to
// three server cores in this process: replies lost after the server applied
// the push, duplicated, reordered and delayed deliveries must neither lose
// nor double an update (SGD at learning rate 1 sums the pushes, so W
// workers adding 1 to the same keys K times must leave exactly W*K), and a
// push that fails part-way must say exactly which parts were applied.
// Every test also checks that its faults actually happened.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/ps_core.h"
#include "tests/in_memory_transport.h"
#include "tests/test_util/table_defs.h"
#include "worker/client/ps_client.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

constexpr int kServers = 3;
constexpr int kWorkers = 4;
constexpr int kPushes = 100;
const PlacementConfig kPlacement{/*slice_size=*/8, /*virtual_nodes=*/64};

// Three cores behind one in-memory transport.
class Cluster {
 public:
  explicit Cluster(Clock* clock = Clock::Real(), uint64_t key_list_cache_bytes = 64 << 20)
      : clock_(clock) {
    std::vector<PsCore*> raw;
    for (int i = 0; i < kServers; ++i) {
      PsCoreOptions options;
      options.server_index = i;
      options.num_servers = kServers;
      options.placement = kPlacement;
      options.clock = clock;
      // Push ids outlive every retry window used here (the backoff test
      // retries after hours of fake time).
      options.limits.dedup_retention = absl::Hours(100);
      options.limits.key_list_cache_bytes = key_list_cache_bytes;
      cores_.push_back(std::make_unique<PsCore>(options));
      raw.push_back(cores_.back().get());
    }
    transport_ = std::make_unique<InMemoryTransport>(raw);
  }

  PsClientOptions Options(uint32_t worker_id) const {
    PsClientOptions options;
    options.placement = kPlacement;
    options.worker_id = worker_id;
    options.timeout = absl::Seconds(5);
    options.max_attempts = 12;  // 10% lost replies: all 12 lost ~ 1e-12
    options.retry_backoff = absl::ZeroDuration();
    options.max_values_per_request = 64;  // several parts per server
    options.clock = clock_;
    return options;
  }
  std::unique_ptr<PsClient> Connect(uint32_t worker_id) const {
    return Connect(Options(worker_id));
  }
  std::unique_ptr<PsClient> Connect(const PsClientOptions& options) const {
    auto client = PsClient::Connect(options, transport_.get());
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }
  InMemoryTransport& transport() { return *transport_; }

 private:
  Clock* const clock_;
  std::vector<std::unique_ptr<PsCore>> cores_;
  std::unique_ptr<InMemoryTransport> transport_;
};

// W workers, each with its own client (connected before the faults start),
// each calling push(client, k) K times under `script`.
template <typename PushFn>
void RunWorkers(Cluster& cluster, const FaultScript& script, PushFn push,
                const std::function<void(PsClientOptions&)>& tweak = nullptr) {
  std::vector<std::unique_ptr<PsClient>> clients;
  for (int w = 0; w < kWorkers; ++w) {
    PsClientOptions options = cluster.Options(w);
    if (tweak) tweak(options);
    clients.push_back(cluster.Connect(options));
    ASSERT_NE(clients.back(), nullptr);
  }
  cluster.transport().SetScript(script);
  std::vector<absl::Status> status(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      for (int k = 0; k < kPushes && status[w].ok(); ++k) status[w] = push(*clients[w], k);
    });
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(status[w].ok()) << "worker " << w << ": " << status[w];
  }
}

FaultScript Script(uint64_t seed, std::vector<FaultRule> rules) {
  FaultScript script;
  script.seed = seed;
  script.rules = std::move(rules);
  return script;
}

// The exact sums are only as good as their faults: each rule of the script
// must have fired.
void ExpectEveryFaultHappened(const FaultScript& script, const FaultCounters& c) {
  for (const FaultRule& rule : script.rules) {
    EXPECT_GT(c.Count(rule.action), 0)
        << "fault " << static_cast<int>(rule.action) << " never happened";
  }
}

FaultRule Rule(FaultAction action, double probability, const std::string& method = "") {
  FaultRule rule;
  rule.action = action;
  rule.probability = probability;
  rule.method = method;
  return rule;
}

// Dense pushes of [0, keys) (every server, several parts each) under
// `script`; then every key must hold exactly W*K.
void DenseSumsExactly(const FaultScript& script) {
  Cluster cluster;
  constexpr uint64_t kKeys = 300;
  auto admin = cluster.Connect(100);
  ASSERT_TRUE(admin->CreateTable(SumTable("sum", kKeys, 1)).ok());
  const std::vector<float> minus_one(kKeys, -1.0f);
  RunWorkers(cluster, script, [&](PsClient& c, int k) {
    PushRange op{"sum", 0, kKeys, minus_one};
    return c.Push({&op, 1}, static_cast<uint64_t>(k));
  });
  ExpectEveryFaultHappened(script, cluster.transport().counters());
  cluster.transport().SetScript({});
  std::vector<float> values(kKeys);
  PullRange pull{"sum", 0, kKeys, absl::MakeSpan(values)};
  ASSERT_TRUE(admin->Pull({&pull, 1}).ok());
  for (uint64_t k = 0; k < kKeys; ++k) ASSERT_EQ(values[k], kWorkers * kPushes) << "key " << k;
}

TEST(FaultInjectionTest, LostRepliesAfterApplyNeitherLoseNorDoubleDenseUpdates) {
  DenseSumsExactly(Script(7, {Rule(FaultAction::kDropReply, 0.1)}));
}

TEST(FaultInjectionTest, DuplicatedReorderedAndDelayedDenseUpdatesApplyOnce) {
  DenseSumsExactly(
      Script(11, {Rule(FaultAction::kDuplicate, 0.1), Rule(FaultAction::kReorder, 0.1),
                  Rule(FaultAction::kDelay, 0.05), Rule(FaultAction::kDropReply, 0.05)}));
}

TEST(FaultInjectionTest, LostRepliesAfterApplyNeitherLoseNorDoubleKeyListUpdates) {
  Cluster cluster;
  constexpr uint32_t kWidth = 3;
  auto admin = cluster.Connect(100);
  ASSERT_TRUE(admin->CreateTable(SumTable("rows", 1000, kWidth)).ok());
  // Scattered keys over every server, one of them twice in the same push.
  const std::vector<uint64_t> keys = {999, 0, 17, 512, 17, 300, 301, 8, 64, 650, 123, 40};
  const std::vector<float> minus_one(keys.size() * kWidth, -1.0f);
  const FaultScript script = Script(
      5, {Rule(FaultAction::kDropReply, 0.1, "Push"), Rule(FaultAction::kDuplicate, 0.05, "Push")});
  RunWorkers(cluster, script, [&](PsClient& c, int k) {
    return c.PushKeys("rows", keys, kWidth, minus_one, static_cast<uint64_t>(k));
  });
  ExpectEveryFaultHappened(script, cluster.transport().counters());
  cluster.transport().SetScript({});
  std::vector<float> values(keys.size() * kWidth);
  ASSERT_TRUE(admin->PullKeys("rows", keys, kWidth, absl::MakeSpan(values)).ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    const float expected = (keys[i] == 17 ? 2 : 1) * kWorkers * kPushes;
    for (uint32_t j = 0; j < kWidth; ++j) {
      ASSERT_EQ(values[i * kWidth + j], expected) << "key " << keys[i] << " column " << j;
    }
  }
}

TEST(FaultInjectionTest, LostAndDuplicatedPushesToASparseTableApplyOnce) {
  Cluster cluster;
  constexpr uint32_t kWidth = 2;
  auto admin = cluster.Connect(100);
  ASSERT_TRUE(admin->CreateTable(SparseSumTable("hashed", kWidth)).ok());
  std::vector<uint64_t> keys = {~uint64_t{0}, 5, 5};  // 5 twice: applied twice
  for (uint64_t k = 1; k <= 40; ++k) keys.push_back(k * 0x9e3779b97f4a7c15ULL);
  const std::vector<float> minus_one(keys.size() * kWidth, -1.0f);
  const FaultScript script =
      Script(29, {Rule(FaultAction::kDropReply, 0.1), Rule(FaultAction::kDuplicate, 0.05),
                  Rule(FaultAction::kReorder, 0.05)});
  RunWorkers(cluster, script, [&](PsClient& c, int k) {
    if (k % 2 == 0) return c.PushKeys("hashed", keys, kWidth, minus_one, static_cast<uint64_t>(k));
    std::vector<float> out(keys.size() * kWidth);
    return c.PushPullKeys("hashed", keys, kWidth, minus_one, absl::MakeSpan(out),
                          static_cast<uint64_t>(k));
  });
  ExpectEveryFaultHappened(script, cluster.transport().counters());
  cluster.transport().SetScript({});
  std::vector<float> values(keys.size() * kWidth);
  ASSERT_TRUE(admin->PullKeys("hashed", keys, kWidth, absl::MakeSpan(values)).ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    const float expected = (keys[i] == 5 ? 2 : 1) * kWorkers * kPushes;
    ASSERT_EQ(values[i * kWidth], expected) << "key " << keys[i];
    ASSERT_EQ(values[i * kWidth + 1], expected) << "key " << keys[i];
  }
}

// Key-list caching and 16-bit values under faults, with server caches so
// small that lists are evicted all the time: lost replies, duplicates and
// reorders of signature-only requests, misses answered by sending the list
// again; every value still ends at exactly W*K (-1 and the sums up to 2048
// are exact in float16).
TEST(FaultInjectionTest, KeyListCachingAndHalfFloatsUnderFaultsApplyOnce) {
  Cluster cluster(Clock::Real(), /*key_list_cache_bytes=*/3 * (50 * 8 + 64));
  auto admin = cluster.Connect(100);
  ASSERT_TRUE(admin->CreateTable(SparseSumTable("hashed", 1)).ok());
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; k <= 120; ++k) keys.push_back(k * 0x9e3779b97f4a7c15ULL);
  const std::vector<float> minus_one(keys.size(), -1.0f);
  const FaultScript script =
      Script(31, {Rule(FaultAction::kDropReply, 0.1), Rule(FaultAction::kDuplicate, 0.05),
                  Rule(FaultAction::kReorder, 0.05)});
  RunWorkers(
      cluster, script,
      [&](PsClient& c, int k) {
        std::vector<float> out(keys.size());
        if (absl::Status s = c.PullKeys("hashed", keys, 1, absl::MakeSpan(out)); !s.ok()) return s;
        if (k % 2 == 0) return c.PushKeys("hashed", keys, 1, minus_one, static_cast<uint64_t>(k));
        return c.PushPullKeys("hashed", keys, 1, minus_one, absl::MakeSpan(out),
                              static_cast<uint64_t>(k));
      },
      [](PsClientOptions& options) {
        options.key_list_caching = true;
        options.value_encoding = proto::VALUES_F16;
      });
  ExpectEveryFaultHappened(script, cluster.transport().counters());
  cluster.transport().SetScript({});
  std::vector<float> values(keys.size());
  ASSERT_TRUE(admin->PullKeys("hashed", keys, 1, absl::MakeSpan(values)).ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(values[i], kWorkers * kPushes) << "key " << keys[i];
  }
  auto stats = admin->Stats();
  ASSERT_TRUE(stats.ok());
  uint64_t hits = 0, misses = 0;
  for (const ServerStats& server : *stats) {
    hits += server.stats.key_list_hits();
    misses += server.stats.key_list_misses();
  }
  EXPECT_GT(hits, 0u);
  EXPECT_GT(misses, 0u) << "the servers' caches were meant to drop lists";
}

// The Downpour step (PushPull, one call per server for both tables) under
// lost replies, duplicates and reorders: every value ends at exactly W*K,
// and every read includes the reader's own pushes so far.
TEST(FaultInjectionTest, PushPullOfTwoTablesAppliesOnceAndReadsItsOwnPush) {
  Cluster cluster;
  constexpr uint64_t kKeys = 200;
  auto admin = cluster.Connect(100);
  ASSERT_TRUE(admin->CreateTable(SumTable("a", kKeys, 1)).ok());
  ASSERT_TRUE(admin->CreateTable(SumTable("b", kKeys, 2)).ok());
  const std::vector<float> minus_one(2 * kKeys, -1.0f);
  const FaultScript script = Script(13, {Rule(FaultAction::kDropReply, 0.1, "PushPull"),
                                         Rule(FaultAction::kDuplicate, 0.05, "PushPull"),
                                         Rule(FaultAction::kReorder, 0.05, "PushPull")});
  RunWorkers(cluster, script, [&](PsClient& c, int k) {
    std::vector<float> a(kKeys), b(2 * kKeys);
    const PushRange push[] = {{"a", 0, kKeys, absl::MakeConstSpan(minus_one).first(kKeys)},
                              {"b", 0, kKeys, minus_one}};
    const PullRange pull[] = {{"a", 0, kKeys, absl::MakeSpan(a)},
                              {"b", 0, kKeys, absl::MakeSpan(b)}};
    PullInfo info;
    absl::Status s = c.PushPull(push, pull, static_cast<uint64_t>(k), &info);
    if (!s.ok()) return s;
    for (float v : a) {
      if (v < k + 1) return absl::InternalError(absl::StrCat("read ", v, " after push ", k));
    }
    for (float v : b) {
      if (v < k + 1) return absl::InternalError(absl::StrCat("read ", v, " after push ", k));
    }
    return absl::OkStatus();
  });
  ExpectEveryFaultHappened(script, cluster.transport().counters());
  cluster.transport().SetScript({});
  std::vector<float> a(kKeys), b(2 * kKeys);
  const PullRange pull[] = {{"a", 0, kKeys, absl::MakeSpan(a)}, {"b", 0, kKeys, absl::MakeSpan(b)}};
  ASSERT_TRUE(admin->Pull(pull).ok());
  for (float v : a) ASSERT_EQ(v, kWorkers * kPushes);
  for (float v : b) ASSERT_EQ(v, kWorkers * kPushes);
}

TEST(FaultInjectionTest, PushPullOfKeysAppliesOnceUnderLostReplies) {
  Cluster cluster;
  constexpr uint32_t kWidth = 2;
  auto admin = cluster.Connect(100);
  ASSERT_TRUE(admin->CreateTable(SumTable("rows", 1000, kWidth)).ok());
  const std::vector<uint64_t> keys = {999, 0, 17, 512, 300, 301, 8, 64, 650, 123, 40};
  const std::vector<float> minus_one(keys.size() * kWidth, -1.0f);
  const FaultScript script = Script(17, {Rule(FaultAction::kDropReply, 0.1, "PushPull")});
  RunWorkers(cluster, script, [&](PsClient& c, int k) {
    std::vector<float> out(keys.size() * kWidth);
    return c.PushPullKeys("rows", keys, kWidth, minus_one, absl::MakeSpan(out),
                          static_cast<uint64_t>(k));
  });
  ExpectEveryFaultHappened(script, cluster.transport().counters());
  cluster.transport().SetScript({});
  std::vector<float> values(keys.size() * kWidth);
  ASSERT_TRUE(admin->PullKeys("rows", keys, kWidth, absl::MakeSpan(values)).ok());
  for (float v : values) ASSERT_EQ(v, kWorkers * kPushes);
}

// Starts `total` PushAsync calls from this thread, op_of(k) for the k-th,
// keeping at most `window` in flight; returns once every done has run, with
// each push's status.
std::vector<absl::Status> PushAsyncWindow(PsClient& client, int total, int window,
                                          const std::function<PushRange(int)>& op_of) {
  absl::Mutex mu;
  int in_flight = 0;
  std::vector<absl::Status> status(total);
  auto below = [&](int n) {
    return [&, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return in_flight < n; };
  };
  for (int k = 0; k < total; ++k) {
    {
      absl::MutexLock lock(&mu);
      auto room = below(window);
      mu.Await(absl::Condition(&room));
      ++in_flight;
    }
    const PushRange op = op_of(k);
    client.PushAsync({&op, 1}, static_cast<uint64_t>(k), [&, k](absl::Status s) {
      absl::MutexLock lock(&mu);
      status[k] = std::move(s);
      --in_flight;
    });
  }
  absl::MutexLock lock(&mu);
  auto none = below(1);
  mu.Await(absl::Condition(&none));
  return status;
}

// One thread per client keeps 16 asynchronous pushes in flight, alternating
// a small push of one part (batched with the others) and a push of several
// parts on every server, under lost replies, duplicates, reorders and
// delays: every key ends at exactly the number of pushes that covered it.
TEST(FaultInjectionTest, AsyncPushesKeptInFlightApplyOnceUnderFaults) {
  Cluster cluster;
  constexpr uint64_t kKeys = 300, kSmall = 8;  // [0, 8) is one slice, one part
  constexpr int kClients = 2, kEach = 200;
  auto admin = cluster.Connect(100);
  ASSERT_TRUE(admin->CreateTable(SumTable("sum", kKeys, 1)).ok());
  const std::vector<float> minus_one(kKeys, -1.0f);
  std::vector<std::unique_ptr<PsClient>> clients;
  for (int w = 0; w < kClients; ++w) clients.push_back(cluster.Connect(w));
  const FaultScript script =
      Script(23, {Rule(FaultAction::kDropReply, 0.1), Rule(FaultAction::kDuplicate, 0.05),
                  Rule(FaultAction::kReorder, 0.05), Rule(FaultAction::kDelay, 0.05)});
  cluster.transport().SetScript(script);
  std::vector<std::vector<absl::Status>> status(kClients);
  std::vector<std::thread> threads;
  for (int w = 0; w < kClients; ++w) {
    threads.emplace_back([&, w] {
      status[w] = PushAsyncWindow(*clients[w], kEach, 16, [&](int k) {
        const uint64_t end = k % 2 == 0 ? kSmall : kKeys;
        return PushRange{"sum", 0, end, absl::MakeConstSpan(minus_one.data(), end)};
      });
    });
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < kClients; ++w) {
    for (int k = 0; k < kEach; ++k) {
      ASSERT_TRUE(status[w][k].ok()) << "client " << w << " push " << k << ": " << status[w][k];
    }
  }
  ExpectEveryFaultHappened(script, cluster.transport().counters());
  cluster.transport().SetScript({});
  std::vector<float> values(kKeys);
  PullRange pull{"sum", 0, kKeys, absl::MakeSpan(values)};
  ASSERT_TRUE(admin->Pull({&pull, 1}).ok());
  for (uint64_t k = 0; k < kKeys; ++k) {
    ASSERT_EQ(values[k], k < kSmall ? kClients * kEach : kClients * kEach / 2) << "key " << k;
  }
}

TEST(FaultInjectionTest, AsyncPushErrorsReachDoneAndTheDestructorWaitsForEveryDone) {
  Cluster cluster;
  auto admin = cluster.Connect(100);
  ASSERT_TRUE(admin->CreateTable(SumTable("t", 64, 1)).ok());
  const std::vector<float> minus_one(64, -1.0f);
  // Refused before anything is sent, and refused by the servers.
  std::vector<absl::Status> refused = PushAsyncWindow(*admin, 2, 2, [&](int k) {
    return k == 0 ? PushRange{"t", 10, 5, {}} : PushRange{"nope", 0, 8, minus_one};
  });
  EXPECT_EQ(refused[0].code(), absl::StatusCode::kInvalidArgument) << refused[0];
  EXPECT_EQ(refused[1].code(), absl::StatusCode::kNotFound) << refused[1];
  EXPECT_THAT(refused[1].message(), HasSubstr("nope"));
  // Delayed replies arrive from the transport's own thread, after the client
  // is gone unless its destructor waits for them.
  cluster.transport().SetScript(Script(2, {Rule(FaultAction::kDelay, 1.0)}));
  std::atomic<int> done{0};
  {
    auto client = cluster.Connect(1);
    for (int k = 0; k < 50; ++k) {
      PushRange op{"t", 0, 64, minus_one};
      client->PushAsync({&op, 1}, 0, [&done](absl::Status s) {
        EXPECT_TRUE(s.ok()) << s;
        done.fetch_add(1);
      });
    }
  }
  EXPECT_EQ(done.load(), 50);
  EXPECT_GT(cluster.transport().counters().delayed, 0);
  cluster.transport().SetScript({});
  std::vector<float> values(64);
  PullRange pull{"t", 0, 64, absl::MakeSpan(values)};
  ASSERT_TRUE(admin->Pull({&pull, 1}).ok());
  for (float v : values) EXPECT_EQ(v, 50.0f);
}

TEST(FaultInjectionTest, LostPullRepliesAreRetried) {
  Cluster cluster;
  auto client = cluster.Connect(0);
  ASSERT_TRUE(client->CreateTable(SumTable("t", 200, 2)).ok());
  std::vector<float> grads(400);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = -static_cast<float>(i);
  PushRange push{"t", 0, 200, grads};
  ASSERT_TRUE(client->Push({&push, 1}, 0).ok());
  cluster.transport().SetScript(Script(3, {Rule(FaultAction::kDropReply, 0.3, "Pull"),
                                           Rule(FaultAction::kDropRequest, 0.2, "Pull")}));
  for (int round = 0; round < 20; ++round) {
    std::vector<float> values(400, -1);
    PullRange pull{"t", 0, 200, absl::MakeSpan(values)};
    ASSERT_TRUE(client->Pull({&pull, 1}).ok());
    for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], i) << i;
  }
  EXPECT_GT(cluster.transport().counters().dropped_replies, 0);
  EXPECT_GT(cluster.transport().counters().dropped_requests, 0);
}

// A push to [0, 200) whose parts on server 1 all fail with `fault`: the
// error and the report must say exactly which parts were applied, and the
// values must agree.
void CheckPartialPush(FaultAction action, const absl::Status& injected,
                      PushPartReport::Outcome failed_outcome) {
  Cluster cluster;
  constexpr uint64_t kKeys = 200;
  const PsClientOptions options = cluster.Options(0);
  auto client = cluster.Connect(options);
  ASSERT_TRUE(client->CreateTable(SumTable("sum", kKeys, 1)).ok());
  FaultRule rule = Rule(action, 1.0, "Push");
  rule.server = 1;
  rule.status = injected;
  cluster.transport().SetScript(Script(1, {rule}));
  const std::vector<float> minus_one(kKeys, -1.0f);
  PushRange op{"sum", 0, kKeys, minus_one};
  PushReport report;
  const absl::Status status = client->Push({&op, 1}, 0, nullptr, &report);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), injected.code());

  // The report: one entry per part, applied exactly where the server was not
  // server 1; every key in exactly one part.
  std::vector<std::string> applied, failed;
  std::vector<int> parts_of_key(kKeys, 0);
  int parts_on_1 = 0;
  for (const PushPartReport& part : report.parts) {
    EXPECT_EQ(part.table, "sum");
    const std::string item =
        absl::StrCat(cluster.transport().ServerName(part.server), " ", part.keys);
    if (part.server == 1) {
      ++parts_on_1;
      EXPECT_EQ(part.outcome, failed_outcome) << item;
      EXPECT_FALSE(part.applied());
      EXPECT_EQ(part.status.code(), injected.code());
      failed.push_back(absl::StrCat(item, " (", absl::StatusCodeToString(injected.code()), ")"));
    } else {
      EXPECT_TRUE(part.applied()) << item << ": " << part.status;
      applied.push_back(item);
    }
  }
  ASSERT_GT(parts_on_1, 1);
  ASSERT_FALSE(applied.empty());

  // The message lists exactly those parts under each heading.
  const std::string message(status.message());
  SCOPED_TRACE(message);
  auto between = [&message](const std::string& from, const std::string& to) {
    size_t b = message.find(from);
    if (b == std::string::npos) return "<no '" + from + "'>";
    b += from.size();
    const size_t e = to.empty() ? std::string::npos : message.find(to, b);
    return message.substr(b, e == std::string::npos ? std::string::npos : e - b);
  };
  EXPECT_EQ(between(", applied: ", ". Not applied: "), absl::StrJoin(applied, "; "));
  if (failed_outcome == PushPartReport::Outcome::kNotApplied) {
    EXPECT_EQ(between(". Not applied: ", ""), absl::StrJoin(failed, "; "));
  } else {
    EXPECT_EQ(between(". Not applied: ", ". No answer"), "none");
    EXPECT_EQ(between(". No answer (may have been applied): ", ""), absl::StrJoin(failed, "; "));
  }

  // Not retried when refused; every attempt when unanswered.
  const FaultCounters c = cluster.transport().counters();
  const int64_t injected_faults = c.failed + c.dropped_requests;
  EXPECT_EQ(injected_faults, action == FaultAction::kFail
                                 ? parts_on_1
                                 : static_cast<int64_t>(parts_on_1) * options.max_attempts);

  // The values confirm it: 1 where applied, 0 on server 1's keys.
  cluster.transport().SetScript({});
  std::vector<float> values(kKeys);
  PullRange pull{"sum", 0, kKeys, absl::MakeSpan(values)};
  ASSERT_TRUE(client->Pull({&pull, 1}).ok());
  const Placement placement(kServers, kPlacement);
  for (uint64_t k = 0; k < kKeys; ++k) {
    EXPECT_EQ(values[k], placement.OwnerOfKey("sum", k) == 1 ? 0.0f : 1.0f) << "key " << k;
  }
}

TEST(FaultInjectionTest, PushRefusedByOneServerSaysWhichPartsWereApplied) {
  CheckPartialPush(FaultAction::kFail, absl::FailedPreconditionError("injected: refused"),
                   PushPartReport::Outcome::kNotApplied);
}

TEST(FaultInjectionTest, PushUnansweredByOneServerSaysWhichPartsMayHaveBeenApplied) {
  CheckPartialPush(FaultAction::kDropRequest, absl::UnavailableError("unused"),
                   PushPartReport::Outcome::kUnknown);
}

TEST(FaultInjectionTest, RetryBackoffWaitsOnTheInjectedClock) {
  FakeClock clock;
  Cluster cluster(&clock);
  PsClientOptions options = cluster.Options(0);
  options.retry_backoff = absl::Hours(1);
  auto client = cluster.Connect(options);
  ASSERT_TRUE(client->CreateTable(SumTable("t", 10, 1)).ok());
  FaultRule drop = Rule(FaultAction::kDropRequest, 1.0);
  drop.max_faults = 1;  // only the first attempt is lost
  cluster.transport().SetScript(Script(1, {drop}));
  const std::vector<float> minus_one(10, -1.0f);
  absl::Notification pushed;
  absl::Status status;
  std::thread pusher([&] {
    PushRange op{"t", 0, 10, minus_one};
    status = client->Push({&op, 1}, 0);
    pushed.Notify();
  });
  // The retry waits an hour of fake time, which does not pass by itself.
  EXPECT_FALSE(pushed.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  while (!pushed.WaitForNotificationWithTimeout(absl::Milliseconds(5))) {
    clock.Advance(absl::Minutes(10));
  }
  pusher.join();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(cluster.transport().counters().dropped_requests, 1);
  std::vector<float> values(10);
  PullRange pull{"t", 0, 10, absl::MakeSpan(values)};
  ASSERT_TRUE(client->Pull({&pull, 1}).ok());
  for (float v : values) EXPECT_EQ(v, 1.0f);
}

TEST(FaultInjectionTest, SecondProcessWithTheSameWorkerIdIsRefusedAtConnect) {
  Cluster cluster;
  PsClientOptions options = cluster.Options(3);
  options.lease = absl::Seconds(30);
  auto first = cluster.Connect(options);
  ASSERT_NE(first, nullptr);
  auto second = PsClient::Connect(options, &cluster.transport());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists) << second.status();
  EXPECT_THAT(second.status().message(), HasSubstr("server 0 (in-memory)"));
  EXPECT_THAT(second.status().message(), HasSubstr("worker id 3"));
  EXPECT_NE(first->incarnation(), 0u);
}

}  // namespace
}  // namespace ps
