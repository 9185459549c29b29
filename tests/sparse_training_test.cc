// Sparse logistic regression end to end: data written by the generator with
// a planted model, two workers training one sparse table with FTRL on two
// in-process servers over gRPC, and the test AUC against the planted
// model's on the same examples.
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/in_process_cluster.h"
#include "worker/train/embedding_mlp.h"
#include "worker/train/libsvm_generator.h"
#include "worker/train/optimizer_spec.h"
#include "worker/train/sparse_trainer.h"

namespace ps {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

// 60,000 training and 10,000 test examples from one planted model, over
// 2,000 features, written under TEST_TMPDIR with the given prefix.
struct Data {
  std::string train, test;
  PlantedModelStats planted;  // of the test set
};
Data GenerateData(const std::string& prefix) {
  LibsvmGeneratorOptions gen;
  gen.seed = 5;
  gen.num_features = 2000;
  gen.features_per_example = 8;
  gen.weight_stddev = 1.0;
  gen.bias = -0.5;
  gen.progress_seconds = 0;
  gen.num_examples = 60000;
  Data data;
  data.train = TempPath(prefix + "_train.svm");
  EXPECT_TRUE(GenerateLibsvmFile(data.train, gen).ok());
  gen.first_example = gen.num_examples;  // the same planted model, new examples
  gen.num_examples = 10000;
  data.test = TempPath(prefix + "_test.svm.gz");
  absl::StatusOr<PlantedModelStats> planted = GenerateLibsvmFile(data.test, gen);
  EXPECT_TRUE(planted.ok()) << planted.status();
  if (planted.ok()) data.planted = *planted;
  return data;
}

// Runs train(client, config) in kWorkers threads, each with its own client
// and its share of the data (2 epochs of minibatches of 64); returns each
// worker's statistics.
constexpr int kWorkers = 2;
std::vector<absl::StatusOr<SparseTrainStats>> TrainOnWorkers(
    const InProcessCluster& cluster, SparseTrainerConfig base,
    const std::function<absl::StatusOr<SparseTrainStats>(PsClient&, const SparseTrainerConfig&)>&
        train) {
  std::vector<absl::StatusOr<SparseTrainStats>> stats(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      auto client = cluster.Connect(w);
      SparseTrainerConfig config = base;
      config.worker_index = w;
      config.num_workers = kWorkers;
      config.epochs = 2;
      config.batch_size = 64;
      stats[w] = train(*client, config);
    });
  }
  for (auto& t : threads) t.join();
  return stats;
}

void NoProgress(const std::string&) {}

// Trains with the row cache's staleness bound `staleness` and the
// significantly-modified filter's `threshold` (0: off).
void TrainAndCompareWithThePlantedModel(uint64_t staleness, float threshold) {
  const Data data = GenerateData("lr");
  auto cluster = InProcessCluster::Start(2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  OptimizerSpec spec;
  spec.optimizer = "ftrl";
  spec.learning_rate = 0.5;
  spec.ftrl_beta = 1;
  spec.l1 = 0.1;
  spec.l2 = 1;
  auto fields = OptimizerFields(spec);
  ASSERT_TRUE(fields.ok()) << fields.status();
  auto admin = (*cluster)->Connect(100);
  ASSERT_TRUE(admin->CreateTable(SparseLrTable("lr/w", *fields, 64)).ok());

  const auto untrained = EvaluateSparseLr(*admin, data.test, "lr/w", 1000);
  ASSERT_TRUE(untrained.ok()) << untrained.status();
  EXPECT_NEAR(untrained->auc, 0.5, 1e-9);  // every prediction is 0.5

  SparseTrainerConfig base;
  base.table = "lr/w";
  base.row_cache_staleness = staleness;
  base.push_threshold = threshold;
  const auto stats =
      TrainOnWorkers(**cluster, base, [&](PsClient& client, const SparseTrainerConfig& config) {
        return TrainSparseLr(client, data.train, config, NoProgress);
      });
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(stats[w].ok()) << "worker " << w << ": " << stats[w].status();
    EXPECT_EQ(stats[w]->examples, 60000);  // half the file, twice
    EXPECT_GT(stats[w]->keys, 0);
    if (threshold == 0) {
      EXPECT_EQ(stats[w]->keys_pushed, stats[w]->keys);
    } else {
      EXPECT_LT(stats[w]->keys_pushed, stats[w]->keys * 3 / 4);
      std::printf("worker %d pushed %lld of %lld keys\n", w,
                  static_cast<long long>(stats[w]->keys_pushed),
                  static_cast<long long>(stats[w]->keys));
    }
    if (staleness == 0) {
      EXPECT_EQ(stats[w]->keys_pulled, stats[w]->keys);
    } else {
      // The hot rows (the bias, the most frequent features) come from the
      // cache most of the time.
      EXPECT_LT(stats[w]->keys_pulled, stats[w]->keys * 3 / 4);
      std::printf("worker %d pulled %lld of %lld keys\n", w,
                  static_cast<long long>(stats[w]->keys_pulled),
                  static_cast<long long>(stats[w]->keys));
    }
  }
  const auto trained = EvaluateSparseLr(*admin, data.test, "lr/w", 1000);
  ASSERT_TRUE(trained.ok()) << trained.status();
  EXPECT_EQ(trained->examples, 10000);
  std::printf("planted auc %.4f logloss %.4f; trained auc %.4f logloss %.4f accuracy %.4f\n",
              data.planted.auc, data.planted.logloss, trained->auc, trained->logloss,
              trained->accuracy);
  EXPECT_GT(trained->auc, data.planted.auc - 0.02);
  EXPECT_LT(trained->logloss, data.planted.logloss + 0.05);
}

TEST(SparseTrainingTest, FtrlOnTwoWorkersComesCloseToThePlantedModel) {
  TrainAndCompareWithThePlantedModel(0, 0);
}

TEST(SparseTrainingTest, RowsCachedForFourStepsCutThePullsAndKeepTheAuc) {
  TrainAndCompareWithThePlantedModel(4, 0);
}

TEST(SparseTrainingTest, TheSignificantlyModifiedFilterCutsThePushesAndKeepsTheAuc) {
  TrainAndCompareWithThePlantedModel(0, 0.5f);
}

TEST(SparseTrainingTest, AnEmbeddingMlpLearnsThePlantedModelToo) {
  const Data data = GenerateData("emb");
  auto cluster = InProcessCluster::Start(2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  OptimizerSpec spec;
  spec.optimizer = "adagrad";
  spec.learning_rate = 0.1;
  auto fields = OptimizerFields(spec);
  ASSERT_TRUE(fields.ok()) << fields.status();
  EmbeddingMlpConfig model;
  model.prefix = "emb";
  model.num_buckets = 64;
  auto admin = (*cluster)->Connect(100);
  for (const proto::TableDef& def : EmbeddingMlpTables(model, *fields)) {
    ASSERT_TRUE(admin->CreateTable(def).ok()) << def.name();
  }
  const auto untrained = EvaluateEmbeddingMlp(*admin, data.test, model, 1000);
  ASSERT_TRUE(untrained.ok()) << untrained.status();

  const auto stats = TrainOnWorkers(
      **cluster, SparseTrainerConfig(), [&](PsClient& client, const SparseTrainerConfig& config) {
        return TrainEmbeddingMlp(client, data.train, config, model, NoProgress);
      });
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(stats[w].ok()) << "worker " << w << ": " << stats[w].status();
    EXPECT_EQ(stats[w]->examples, 60000);
  }
  const auto trained = EvaluateEmbeddingMlp(*admin, data.test, model, 1000);
  ASSERT_TRUE(trained.ok()) << trained.status();
  std::printf("embedding mlp: untrained auc %.4f; planted %.4f; trained %.4f (log-loss %.4f)\n",
              untrained->auc, data.planted.auc, trained->auc, trained->logloss);
  EXPECT_GT(trained->auc, untrained->auc + 0.1);
  EXPECT_GT(trained->auc, data.planted.auc - 0.05);
}

}  // namespace
}  // namespace ps
