// Hierarchical aggregation (LocalAggregator) on real in-process shards: 4
// workers as 2 hosts x 2 threads, each host one BSP worker to the servers.
// Full-batch SGD steps, so the rounds are what one process computes:
//   c_{t+1} = c_t - lr (g_0 + g_1) - lr (g_2 + g_3),
// each host pushing the sum of its two workers' gradients. The servers
// receive half the bytes of the flat run (4 workers pushing and pulling
// alone), which ends at the same parameters up to float rounding.
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/in_process_cluster.h"
#include "tests/test_util/table_defs.h"
#include "worker/client/local_aggregator.h"
#include "worker/train/dataset.h"
#include "worker/train/model.h"
#include "worker/train/synthetic_data.h"
#include "worker/train/trainer.h"

namespace ps {
namespace {

constexpr int kHosts = 2, kPerHost = 2, kWorkers = kHosts * kPerHost;
constexpr int kDim = 6, kClasses = 3, kPerWorker = 16, kSteps = 5;
constexpr float kLr = 0.3f;

class LocalAggregationTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(WithSgd(proto::TableDef(), kLr)); }

  // A fresh cluster with the model's tables, `optimizer` on each.
  void Start(const proto::TableDef& optimizer) {
    auto cluster = InProcessCluster::Start(2, {/*slice_size=*/8, 512});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    const auto tables = ModelTables(*model_, "m", optimizer, /*seed=*/4);
    ASSERT_TRUE(CreateModelTables(*cluster_->Connect(98), tables).ok());
  }

  // BSP client options of worker `id`; with `reduce`, its pushes ask for
  // the servers' reduction as logical workers [first, first + size).
  PsClientOptions Options(uint32_t id, bool reduce, uint32_t first, uint32_t size) const {
    PsClientOptions options = cluster_->BoundedClientOptions(id, /*tau=*/0);
    if (reduce) {
      options.reduce.set_first(first);
      options.reduce.set_size(size);
    }
    return options;
  }

  TrainerConfig Config(int w) const {
    TrainerConfig config;
    config.worker_index = w;
    config.num_workers = kWorkers;
    config.epochs = kSteps;  // one full-batch step per epoch
    config.batch_size = kPerWorker;
    config.consistency = Consistency::kBsp;
    config.table_prefix = "m";
    return config;
  }

  // The hosts' BSP clients (ids 0 and 1), each shared by its two workers.
  // Returns the parameter values each host pushed and pulled.
  std::vector<int64_t> TrainHierarchical(bool reduce = false) {
    std::vector<std::unique_ptr<PsClient>> hosts;
    std::vector<std::unique_ptr<LocalAggregator>> aggregators;
    for (int h = 0; h < kHosts; ++h) {
      hosts.push_back(cluster_->Connect(Options(h, reduce, h * kPerHost, kPerHost)));
      if (hosts.back() == nullptr) return {};
      aggregators.push_back(std::make_unique<LocalAggregator>(*hosts.back(), kPerHost));
    }
    std::vector<absl::StatusOr<TrainStats>> results(kWorkers, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int w = 0; w < kWorkers; ++w) {
      threads.emplace_back([&, w] {
        LocalAggregator& aggregator = *aggregators[w / kPerHost];
        results[w] =
            TrainDownpour(aggregator.member(w % kPerHost), *model_, Shard(w), Config(w), nullptr);
        aggregator.Leave(w % kPerHost);
      });
    }
    for (auto& t : threads) t.join();
    std::vector<int64_t> moved;
    for (int w = 0; w < kWorkers; ++w) {
      EXPECT_TRUE(results[w].ok()) << "worker " << w << ": " << results[w].status();
    }
    for (int h = 0; h < kHosts; ++h) {
      hosts[h]->Leave();
      moved.push_back(aggregators[h]->values_pushed() + aggregators[h]->values_pulled());
    }
    return moved;
  }

  // The same 4 workers, each its own BSP worker to the servers. Returns the
  // parameter values each pushed and pulled.
  std::vector<int64_t> TrainFlat(bool reduce = false) {
    std::vector<std::unique_ptr<PsClient>> clients;
    for (int w = 0; w < kWorkers; ++w) {
      clients.push_back(cluster_->Connect(Options(w, reduce, w, 1)));
      if (clients.back() == nullptr) return {};
    }
    std::vector<absl::StatusOr<TrainStats>> results(kWorkers, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int w = 0; w < kWorkers; ++w) {
      threads.emplace_back([&, w] {
        results[w] = TrainDownpour(*clients[w], *model_, Shard(w), Config(w), nullptr);
        clients[w]->Leave();
      });
    }
    for (auto& t : threads) t.join();
    std::vector<int64_t> moved;
    for (int w = 0; w < kWorkers; ++w) {
      EXPECT_TRUE(results[w].ok()) << "worker " << w << ": " << results[w].status();
      if (results[w].ok()) moved.push_back(results[w]->values_pushed + results[w]->values_pulled);
    }
    return moved;
  }

  std::vector<float> Params() {
    std::vector<float> c(model_->num_params());
    auto reader = cluster_->Connect(99);
    EXPECT_TRUE(PullParams(*reader, *model_, "m", absl::MakeSpan(c)).ok());
    return c;
  }

  Dataset Shard(int w) const { return ShardOf(data_, w, kWorkers); }

  // Worker w's full-batch gradient at c.
  std::vector<float> Gradient(int w, const std::vector<float>& c) const {
    const Dataset shard = Shard(w);
    std::vector<float> g(c.size());
    model_->LossAndGradient(c, shard.features.data(), shard.labels.data(),
                            static_cast<int>(shard.num_examples), absl::MakeSpan(g));
    return g;
  }

  const std::unique_ptr<Model> model_ = MakeSoftmaxRegression(kDim, kClasses);
  const Dataset data_ = MakeLinearlySeparable(kWorkers * kPerWorker, kDim, kClasses, /*seed=*/11);
  std::unique_ptr<InProcessCluster> cluster_;
};

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "value " << i;
}

TEST_F(LocalAggregationTest, EachHostPushesItsWorkersSumAndHalvesTheBytes) {
  std::vector<float> c = Params();  // the tables' initial values
  const std::vector<int64_t> moved = TrainHierarchical();
  for (int t = 0; t < kSteps; ++t) {
    std::vector<float> next = c;
    for (int h = 0; h < kHosts; ++h) {
      const std::vector<float> a = Gradient(h * kPerHost, c);
      const std::vector<float> b = Gradient(h * kPerHost + 1, c);
      for (size_t i = 0; i < c.size(); ++i) next[i] -= kLr * (a[i] + b[i]);
    }
    c = next;
  }
  const std::vector<float> hierarchical = Params();
  ExpectNear(hierarchical, c);
  // Each host, under BSP: a pull and a push per step, what one flat worker
  // moves.
  const int64_t per_worker = 2 * kSteps * model_->num_params();
  ASSERT_EQ(moved.size(), static_cast<size_t>(kHosts));
  for (int64_t m : moved) EXPECT_EQ(m, per_worker);

  // The flat run from the same start: the same parameters (up to rounding),
  // twice the bytes in all.
  SetUp();
  const std::vector<int64_t> flat_moved = TrainFlat();
  ExpectNear(Params(), hierarchical);
  ASSERT_EQ(flat_moved.size(), static_cast<size_t>(kWorkers));
  int64_t flat_total = 0, hierarchical_total = 0;
  for (int64_t m : flat_moved) flat_total += m;
  for (int64_t m : moved) hierarchical_total += m;
  EXPECT_EQ(flat_total, 2 * hierarchical_total);
}

// With the servers' reduction (PushRequest.reduce) each round is summed in
// one tree over the 4 logical workers and applied as one step, so 2 hosts
// x 2 end bit-identical to the flat run, even with AdaGrad, whose step
// with a sum is not two steps with its parts; without it they differ.
TEST_F(LocalAggregationTest, WithTheServersReductionHierarchicalIsBitIdenticalToFlat) {
  const proto::TableDef adagrad = WithAdagrad(proto::TableDef(), kLr, 0.1f);
  Start(adagrad);
  const std::vector<float> start = Params();
  TrainFlat(/*reduce=*/true);
  const std::vector<float> flat = Params();
  Start(adagrad);
  TrainHierarchical(/*reduce=*/true);
  const std::vector<float> hierarchical = Params();
  EXPECT_NE(flat, start);
  EXPECT_EQ(hierarchical, flat);
  Start(adagrad);
  TrainHierarchical(/*reduce=*/false);
  EXPECT_NE(Params(), flat) << "without the reduction a host's AdaGrad step is another update";
}

}  // namespace
}  // namespace ps
