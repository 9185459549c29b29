// Three shards in one process and four worker threads train softmax
// regression with Downpour SGD (async) on a generated, linearly separable
// data set; the parameters left on the servers must classify >= 95% of the
// training set. Run with communication done in line and overlapped.
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/in_process_cluster.h"
#include "tests/test_util/table_defs.h"
#include "worker/train/dataset.h"
#include "worker/train/model.h"
#include "worker/train/synthetic_data.h"
#include "worker/train/trainer.h"

namespace ps {
namespace {

class InProcessTrainingTest : public ::testing::TestWithParam<bool> {};

TEST_P(InProcessTrainingTest, FourWorkersThreeShardsReachNinetyFivePercent) {
  constexpr int kServers = 3, kWorkers = 4, kDim = 20, kClasses = 5;
  // Small slices so that every table spans all three shards.
  auto cluster = InProcessCluster::Start(kServers, {/*slice_size=*/16, 512});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const Dataset data = MakeLinearlySeparable(4000, kDim, kClasses, /*seed=*/3);
  const auto model = MakeSoftmaxRegression(kDim, kClasses);

  const proto::TableDef optimizer =
      WithAdagrad(proto::TableDef(), /*learning_rate=*/0.1f, /*initial_accumulator=*/0.1f);
  const auto tables = ModelTables(*model, "softmax", optimizer, /*seed=*/5);

  std::vector<absl::Status> results(kWorkers);
  std::vector<TrainStats> stats(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      auto client = (*cluster)->Connect(w);
      if (client == nullptr) {
        results[w] = absl::UnavailableError("connect failed");
        return;
      }
      if (absl::Status s = CreateModelTables(*client, tables); !s.ok()) {
        results[w] = s;
        return;
      }
      TrainerConfig config;
      config.worker_index = w;
      config.num_workers = kWorkers;
      config.epochs = 5;
      config.batch_size = 16;
      config.overlap = GetParam();
      config.n_fetch = 2;
      config.n_push = config.overlap ? 2 : 1;
      config.table_prefix = "softmax";
      auto trained = TrainDownpour(*client, *model, ShardOf(data, w, kWorkers), config, nullptr);
      results[w] = trained.status();
      if (trained.ok()) stats[w] = *trained;
    });
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(results[w].ok()) << "worker " << w << ": " << results[w];
    EXPECT_EQ(stats[w].examples, 5 * 1000) << "worker " << w << " saw its whole shard 5 times";
    EXPECT_GT(stats[w].pushes, 0);
  }

  auto client = (*cluster)->Connect(99);
  ASSERT_NE(client, nullptr);
  std::vector<float> params(model->num_params());
  ASSERT_TRUE(PullParams(*client, *model, "softmax", absl::MakeSpan(params)).ok());
  const double accuracy = Accuracy(*model, params, data);
  EXPECT_GE(accuracy, 0.95) << "training accuracy " << accuracy;

  // Every shard holds part of the model.
  for (int s = 0; s < kServers; ++s) {
    int owned = 0;
    for (uint64_t slice = 0; slice * 16 < static_cast<uint64_t>(kDim * kClasses); ++slice) {
      owned += client->placement().OwnerOfSlice("softmax/fc0/w", slice) == s;
    }
    EXPECT_GT(owned, 0) << "server " << s << " owns no slice of the weights";
  }
}

INSTANTIATE_TEST_SUITE_P(SequentialAndOverlapped, InProcessTrainingTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Overlap" : "Sequential"; });

}  // namespace
}  // namespace ps
