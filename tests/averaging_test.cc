// Model averaging and EASGD on real in-process shards, several workers in
// threads, BSP: the servers end with exactly what one process computes
// from the same rounds (full-batch local steps, so the shuffle does not
// change them, and a straggler changes nothing but the time):
//  - averaging: c_{t+1} = mean over workers of (tau SGD steps from c_t);
//  - EASGD: e_w = alpha (x_w - c_t) after each worker's tau steps, x_w -= e_w,
//    c_{t+1} = c_t + sum of e_w.
// And asynchronous averaging, whose result depends on the interleaving,
// still trains: the loss falls.
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/in_process_cluster.h"
#include "worker/train/averaging_test_util.h"
#include "worker/train/averaging_trainer.h"
#include "worker/train/dataset.h"
#include "worker/train/model.h"
#include "worker/train/synthetic_data.h"
#include "worker/train/trainer.h"

namespace ps {
namespace {

constexpr int kWorkers = 3, kDim = 6, kClasses = 3, kPerWorker = 16;
constexpr float kLr = 0.3f;

class AveragingOnServersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = InProcessCluster::Start(2, {/*slice_size=*/8, 512});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    tables_ = ModelTables(*model_, "m", AveragingTableOptimizer(), /*seed=*/4);
    ASSERT_TRUE(CreateModelTables(*cluster_->Connect(98), tables_).ok());
  }

  // Runs the workers in threads (worker 1 three times slower); returns
  // the center the servers end with.
  std::vector<float> Train(const AveragingConfig& averaging, Consistency consistency, int steps,
                           std::vector<TrainStats>* stats) {
    std::vector<std::unique_ptr<PsClient>> clients;
    for (int w = 0; w < kWorkers; ++w) {
      clients.push_back(cluster_->Connect(consistency == Consistency::kBsp
                                              ? cluster_->BoundedClientOptions(w, /*tau=*/0)
                                              : cluster_->ClientOptions(w)));
      if (clients.back() == nullptr) return {};
    }
    std::vector<absl::StatusOr<TrainStats>> results(kWorkers, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int w = 0; w < kWorkers; ++w) {
      threads.emplace_back([&, w] {
        TrainerConfig config;
        config.worker_index = w;
        config.num_workers = kWorkers;
        config.epochs = steps;  // one full-batch step per epoch
        config.batch_size = kPerWorker;
        config.consistency = consistency;
        config.table_prefix = "m";
        config.slowdown = w == 1 ? 3.0 : 1.0;
        results[w] = TrainAveraging(*clients[w], *model_, Shard(w), config, averaging, nullptr);
        clients[w]->Leave();
      });
    }
    for (auto& t : threads) t.join();
    for (int w = 0; w < kWorkers; ++w) {
      EXPECT_TRUE(results[w].ok()) << "worker " << w << ": " << results[w].status();
      if (results[w].ok() && stats != nullptr) stats->push_back(*results[w]);
    }
    return Center();
  }

  std::vector<float> Center() {
    std::vector<float> c(model_->num_params());
    auto reader = cluster_->Connect(99);
    EXPECT_TRUE(PullParams(*reader, *model_, "m", absl::MakeSpan(c)).ok());
    return c;
  }

  Dataset Shard(int w) const { return ShardOf(data_, w, kWorkers); }

  // `steps` full-batch SGD steps of worker w's shard from x.
  void LocalSteps(int w, int steps, std::vector<float>& x) const {
    const Dataset shard = Shard(w);
    std::vector<float> g(x.size());
    for (int s = 0; s < steps; ++s) {
      model_->LossAndGradient(x, shard.features.data(), shard.labels.data(),
                              static_cast<int>(shard.num_examples), absl::MakeSpan(g));
      for (size_t i = 0; i < x.size(); ++i) x[i] -= kLr * g[i];
    }
  }

  static AveragingConfig Config(Algorithm algorithm, int every, double alpha = 0.25) {
    return LocalSgdAveraging(algorithm, every, alpha, kLr);
  }

  const std::unique_ptr<Model> model_ = MakeSoftmaxRegression(kDim, kClasses);
  const Dataset data_ = MakeLinearlySeparable(kWorkers * kPerWorker, kDim, kClasses, /*seed=*/11);
  std::unique_ptr<InProcessCluster> cluster_;
  std::vector<proto::TableDef> tables_;
};

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "value " << i;
}

TEST_F(AveragingOnServersTest, BspAveragingIsTheMeanOfTheWorkersCopies) {
  std::vector<float> c = Center();  // the tables' initial values
  std::vector<TrainStats> stats;
  // 7 steps in rounds of 3, 3 and 1.
  const std::vector<float> got =
      Train(Config(Algorithm::kAverage, 3), Consistency::kBsp, 7, &stats);
  for (int steps : {3, 3, 1}) {
    std::vector<float> next(c.size(), 0.0f);
    for (int w = 0; w < kWorkers; ++w) {
      std::vector<float> x = c;
      LocalSteps(w, steps, x);
      for (size_t i = 0; i < c.size(); ++i) next[i] += x[i] / kWorkers;
    }
    c = next;
  }
  ExpectNear(got, c);
  ASSERT_EQ(stats.size(), static_cast<size_t>(kWorkers));
  for (const TrainStats& s : stats) EXPECT_EQ(s.pushes, 3);
}

TEST_F(AveragingOnServersTest, BspEasgdIsItsSynchronousForm) {
  constexpr double kAlpha = 0.25;
  std::vector<float> c = Center();
  const std::vector<float> got =
      Train(Config(Algorithm::kEasgd, 2, kAlpha), Consistency::kBsp, 6, nullptr);
  std::vector<std::vector<float>> x(kWorkers, c);
  for (int round = 0; round < 3; ++round) {
    std::vector<float> next = c;
    for (int w = 0; w < kWorkers; ++w) {
      LocalSteps(w, 2, x[w]);
      for (size_t i = 0; i < c.size(); ++i) {
        const float e = static_cast<float>(kAlpha) * (x[w][i] - c[i]);
        x[w][i] -= e;
        next[i] += e;
      }
    }
    c = next;
  }
  ExpectNear(got, c);
}

// Async: the result depends on how the workers interleave, but the center
// trains: its loss over all the data falls well below the start's.
TEST_F(AveragingOnServersTest, AsyncAveragingAndEasgdTrain) {
  const std::vector<float> start = Center();
  std::vector<float> g(start.size());
  const int n = static_cast<int>(data_.num_examples);
  const float loss0 = model_->LossAndGradient(start, data_.features.data(), data_.labels.data(), n,
                                              absl::MakeSpan(g));
  for (Algorithm algorithm : {Algorithm::kAverage, Algorithm::kEasgd}) {
    SetUp();  // fresh tables
    const std::vector<float> c = Train(Config(algorithm, 4), Consistency::kAsync, 40, nullptr);
    const float loss = model_->LossAndGradient(c, data_.features.data(), data_.labels.data(), n,
                                               absl::MakeSpan(g));
    EXPECT_LT(loss, 0.5f * loss0) << AlgorithmName(algorithm) << ": " << loss0 << " -> " << loss;
  }
}

}  // namespace
}  // namespace ps
