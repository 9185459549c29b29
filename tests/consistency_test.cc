// Consistency models against real in-process shards:
//  - bounded delay holds: with tau in {0, 2} and one worker slowed 3x, no pull
//    returns parameters more than tau rounds behind the puller's clock, as
//    recorded from the clocks the servers report (not from timing);
//  - BSP is exact: with plain SGD, W workers for T rounds end with the
//    parameters one process computes from the same gradients in the same
//    rounds, and every round's pull returns exactly that round's parameters.
#include <cmath>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/in_process_cluster.h"
#include "tests/test_util/table_defs.h"
#include "worker/train/dataset.h"
#include "worker/train/model.h"
#include "worker/train/synthetic_data.h"
#include "worker/train/trainer.h"

namespace ps {
namespace {

class BoundedDelayTest : public ::testing::TestWithParam<int> {};

TEST_P(BoundedDelayTest, NoPullSeesParametersOlderThanTau) {
  const uint32_t tau = GetParam();
  constexpr int kWorkers = 4, kDim = 10, kClasses = 3;
  auto cluster = InProcessCluster::Start(2, {/*slice_size=*/8, 512});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const Dataset data = MakeLinearlySeparable(kWorkers * 320, kDim, kClasses, /*seed=*/9);
  const auto model = MakeSoftmaxRegression(kDim, kClasses);
  const proto::TableDef optimizer =
      WithAdagrad(proto::TableDef(), /*learning_rate=*/0.1f, /*initial_accumulator=*/0.1f);
  const auto tables = ModelTables(*model, "m", optimizer, 1);

  std::vector<std::unique_ptr<PsClient>> clients;
  for (int w = 0; w < kWorkers; ++w) {
    auto client = PsClient::Connect((*cluster)->BoundedClientOptions(w, tau));
    ASSERT_TRUE(client.ok()) << client.status();
    clients.push_back(*std::move(client));
  }
  ASSERT_TRUE(CreateModelTables(*clients[0], tables).ok());
  std::vector<absl::StatusOr<TrainStats>> stats(kWorkers, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      TrainerConfig config;
      config.worker_index = w;
      config.num_workers = kWorkers;
      config.epochs = 2;
      config.batch_size = 16;
      config.table_prefix = "m";
      config.slowdown = w == kWorkers - 1 ? 3.0 : 1.0;  // the straggler
      stats[w] = TrainDownpour(*clients[w], *model, ShardOf(data, w, kWorkers), config, nullptr);
      clients[w]->Leave();
    });
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(stats[w].ok()) << "worker " << w << ": " << stats[w].status();
    EXPECT_EQ(stats[w]->steps, 40) << "worker " << w;
    EXPECT_LE(stats[w]->max_clock_lag, tau) << "worker " << w;
    uint64_t pulls = 0;
    for (uint64_t c : stats[w]->clock_lag_histogram) pulls += c;
    EXPECT_EQ(pulls, 40u) << "worker " << w << " recorded every pull";
  }
  // The servers' own record agrees. They measure staleness against their
  // clock (the furthest round any worker completed), which bounded delay
  // keeps within tau + 1 of the slowest worker: a worker completes round c
  // only after reading at clock c, which needed everyone past c - tau.
  auto server_stats = clients[0]->Stats();
  ASSERT_TRUE(server_stats.ok()) << server_stats.status();
  uint64_t pulls = 0;
  for (const ServerStats& s : *server_stats) {
    for (const proto::TableStats& t : s.stats.tables()) {
      for (int i = 0; i < t.staleness_histogram_size(); ++i) {
        pulls += t.staleness_histogram(i);
        if (static_cast<uint32_t>(i) > tau + 1) {
          EXPECT_EQ(t.staleness_histogram(i), 0u)
              << "server " << s.server << " table " << t.table() << " lag " << i;
        }
      }
    }
  }
  EXPECT_GT(pulls, 0u);
}

INSTANTIATE_TEST_SUITE_P(Tau, BoundedDelayTest, ::testing::Values(0, 2),
                         [](const auto& info) { return "tau" + std::to_string(info.param); });

TEST(BspTest, WorkersMatchOneProcessComputingTheSameRounds) {
  constexpr int kWorkers = 3, kRounds = 8;
  constexpr uint64_t kKeys = 40;
  constexpr float kLr = 0.1f;
  auto cluster = InProcessCluster::Start(2, {/*slice_size=*/8, 512});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const proto::TableDef def =
      WithSgd(WithUniformInit(DenseTableDef("x", kKeys, 1), -1, 1, /*seed=*/3), kLr);

  // Worker w's gradient depends on the parameters it read:
  // g_w(p)[k] = a_w * p[k] + b_w[k].
  auto gradient = [](int w, const std::vector<float>& p) {
    std::vector<float> g(p.size());
    for (size_t k = 0; k < p.size(); ++k) {
      g[k] = 0.1f * (w + 1) * p[k] + std::sin(static_cast<float>(k + 7 * w));
    }
    return g;
  };

  std::vector<std::unique_ptr<PsClient>> clients;
  for (int w = 0; w < kWorkers; ++w) {
    auto client = PsClient::Connect((*cluster)->BoundedClientOptions(w, /*tau=*/0));
    ASSERT_TRUE(client.ok()) << client.status();
    clients.push_back(*std::move(client));
  }
  ASSERT_TRUE(clients[0]->CreateTable(def).ok());
  // seen[w][t]: the parameters worker w read in round t.
  std::vector<std::vector<std::vector<float>>> seen(kWorkers);
  std::vector<absl::Status> status(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      for (uint64_t t = 0; t < kRounds && status[w].ok(); ++t) {
        std::vector<float> p(kKeys);
        PullRange pull{"x", 0, kKeys, absl::MakeSpan(p)};
        status[w] = clients[w]->Pull({&pull, 1}, t);
        if (!status[w].ok()) break;
        seen[w].push_back(p);
        if (w == 1) absl::SleepFor(absl::Milliseconds(5));  // uneven speeds
        const std::vector<float> g = gradient(w, p);
        PushRange push{"x", 0, kKeys, g};
        status[w] = clients[w]->Push({&push, 1}, t);
      }
      clients[w]->Leave();
    });
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w)
    ASSERT_TRUE(status[w].ok()) << "worker " << w << ": " << status[w];

  // One process, the same rounds: p_{t+1} = p_t - lr * sum_w g_w(p_t).
  std::vector<float> p = seen[0][0];
  for (int t = 0; t < kRounds; ++t) {
    for (int w = 0; w < kWorkers; ++w) {
      for (uint64_t k = 0; k < kKeys; ++k) {
        ASSERT_NEAR(seen[w][t][k], p[k], 1e-5) << "worker " << w << " round " << t << " key " << k;
      }
    }
    std::vector<float> next = p;
    for (int w = 0; w < kWorkers; ++w) {
      const std::vector<float> g = gradient(w, p);
      for (uint64_t k = 0; k < kKeys; ++k) next[k] -= kLr * g[k];
    }
    p = next;
  }
  auto reader = (*cluster)->Connect(99);
  std::vector<float> final_values(kKeys);
  PullRange pull{"x", 0, kKeys, absl::MakeSpan(final_values)};
  ASSERT_TRUE(reader->Pull({&pull, 1}).ok());
  for (uint64_t k = 0; k < kKeys; ++k) EXPECT_NEAR(final_values[k], p[k], 1e-5) << "key " << k;
}

}  // namespace
}  // namespace ps

namespace ps {
namespace {

TEST(BspTest, PullThatCannotBeSatisfiedFailsNamingTheSlowestWorker) {
  auto cluster = InProcessCluster::Start(1);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  PsClientOptions fast = (*cluster)->BoundedClientOptions(0, 0);
  fast.timeout = absl::Seconds(1);
  fast.max_attempts = 1;
  auto worker0 = PsClient::Connect(fast);
  auto worker5 =
      PsClient::Connect((*cluster)->BoundedClientOptions(5, 0));  // registered, never pushes
  ASSERT_TRUE(worker0.ok() && worker5.ok());
  const proto::TableDef def = SumTable("t", 4, 1);
  ASSERT_TRUE((*worker0)->CreateTable(def).ok());
  std::vector<float> v(4);
  PullRange pull{"t", 0, 4, absl::MakeSpan(v)};
  ASSERT_TRUE((*worker0)->Pull({&pull, 1}, 0).ok());
  PushRange push{"t", 0, 4, v};
  // Round 0 is applied once worker 5 has read it too.
  ASSERT_TRUE((*worker5)->Pull({&pull, 1}, 0).ok());
  ASSERT_TRUE((*worker0)->Push({&push, 1}, 0).ok());
  absl::Status s = (*worker0)->Pull({&pull, 1}, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("slowest live worker is 5 at clock 0"));
}

}  // namespace
}  // namespace ps
