// Sparse logistic regression end to end: data written by the generator with
// a planted model, two workers training one sparse table with FTRL on two
// in-process servers over gRPC, and the test AUC against the planted
// model's on the same examples; the embedding MLP, with its dense tables on
// the servers or by allreduce among the workers.
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/in_process_cluster.h"
#include "tests/test_util/temp_dir.h"
#include "worker/client/optimizer_spec.h"
#include "worker/collective/local_collective.h"
#include "worker/train/dense_allreduce.h"
#include "worker/train/embedding_mlp.h"
#include "worker/train/libsvm_generator.h"
#include "worker/train/sparse_trainer.h"

namespace ps {
namespace {

// 60,000 training and 10,000 test examples from one planted model, over
// 2,000 features, written under TEST_TMPDIR with the given prefix; with
// num_fields > 0, as field:index:value lines (the same examples).
struct Data {
  std::string train, test;
  PlantedModelStats planted;  // of the test set
};
Data GenerateData(const std::string& prefix, uint32_t num_fields = 0) {
  LibsvmGeneratorOptions gen;
  gen.seed = 5;
  gen.num_fields = num_fields;
  gen.num_features = 2000;
  gen.features_per_example = 8;
  gen.weight_stddev = 1.0;
  gen.bias = -0.5;
  gen.progress_seconds = 0;
  gen.num_examples = 60000;
  Data data;
  data.train = TestTmpDir() + "/" + prefix + "_train.svm";
  EXPECT_TRUE(GenerateLibsvmFile(data.train, gen).ok());
  gen.first_example = gen.num_examples;  // the same planted model, new examples
  gen.num_examples = 10000;
  data.test = TestTmpDir() + "/" + prefix + "_test.svm.gz";
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

// What TrainEmbeddingMlpOn measured: test AUCs before and after training,
// and the hidden layer's weights (w1) before and after.
struct MlpRun {
  double untrained_auc = 0, trained_auc = 0;
  std::vector<float> w1_before, w1_after;
};

// Trains an embedding MLP with `fields` fields on `data` (two workers,
// AdaGrad), its dense tables on the servers, or kept by the workers and
// stepped by allreduce (`allreduce`, among the threads; each round checks
// that both hold the same bits). With allreduce, the workers train on the
// first 59,905 examples: worker 0 has one more, so one more batch a epoch,
// and worker 1 joins its last rounds idle.
MlpRun TrainEmbeddingMlpOn(const Data& data, uint32_t fields, bool allreduce = false) {
  MlpRun run;
  auto cluster = InProcessCluster::Start(2);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  if (!cluster.ok()) return run;
  OptimizerSpec spec;
  spec.optimizer = "adagrad";
  spec.learning_rate = 0.1;
  auto fields_of_optimizer = OptimizerFields(spec);
  EXPECT_TRUE(fields_of_optimizer.ok()) << fields_of_optimizer.status();
  EmbeddingMlpConfig model;
  model.prefix = "emb";
  model.num_buckets = 64;
  model.num_fields = fields;
  auto admin = (*cluster)->Connect(100);
  std::vector<proto::TableDef> tables = EmbeddingMlpTables(model, *fields_of_optimizer);
  if (allreduce) {
    auto copies = ServerCopyTables({tables.begin() + 1, tables.end()});
    EXPECT_TRUE(copies.ok()) << copies.status();
    if (!copies.ok()) return run;
    tables.resize(1);
    tables.insert(tables.end(), copies->begin(), copies->end());
  }
  for (const proto::TableDef& def : tables) {
    EXPECT_TRUE(admin->CreateTable(def).ok()) << def.name();
  }
  const auto untrained = EvaluateEmbeddingMlp(*admin, data.test, model, 1000);
  EXPECT_TRUE(untrained.ok()) << untrained.status();
  if (!untrained.ok()) return run;
  run.untrained_auc = untrained->auc;
  auto pull_w1 = [&](std::vector<float>* w1) {
    w1->assign(size_t{fields} * model.dim * model.hidden, 0.0f);
    const PullRange op[] = {{"emb/w1", 0, w1->size(), absl::MakeSpan(*w1)}};
    EXPECT_TRUE(admin->Pull(op).ok());
  };
  pull_w1(&run.w1_before);

  LocalGroup group(kWorkers, absl::Seconds(60));
  SparseTrainerConfig base;
  if (allreduce) {
    base.max_train_examples = 59905;  // 29,953 and 29,952: 469 and 468 batches of 64
    base.dense_allreduce.optimizer = *fields_of_optimizer;
    base.dense_allreduce.publish_every = 50;
    base.dense_allreduce.check_every = 1;
  }
  const auto stats =
      TrainOnWorkers(**cluster, base, [&](PsClient& client, const SparseTrainerConfig& config) {
        SparseTrainerConfig mine = config;
        if (allreduce) mine.dense_allreduce.group = group.Member(config.worker_index);
        return TrainEmbeddingMlp(client, data.train, mine, model, NoProgress);
      });
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_TRUE(stats[w].ok()) << "worker " << w << ": " << stats[w].status();
    if (!stats[w].ok()) continue;
    EXPECT_EQ(stats[w]->examples, allreduce ? 2 * (29953 - w) : 60000);
    // Every worker took part in every round: worker 0's 2 * 469 steps.
    EXPECT_EQ(stats[w]->allreduce_rounds, allreduce ? 2 * 469 : 0);
  }
  const auto trained = EvaluateEmbeddingMlp(*admin, data.test, model, 1000);
  EXPECT_TRUE(trained.ok()) << trained.status();
  if (!trained.ok()) return run;
  run.trained_auc = trained->auc;
  pull_w1(&run.w1_after);
  std::printf(
      "embedding mlp, %u field(s): untrained auc %.4f; planted %.4f; trained %.4f "
      "(log-loss %.4f)\n",
      fields, untrained->auc, data.planted.auc, trained->auc, trained->logloss);
  return run;
}

TEST(SparseTrainingTest, AnEmbeddingMlpLearnsThePlantedModelToo) {
  const Data data = GenerateData("emb");
  const MlpRun run = TrainEmbeddingMlpOn(data, 1);
  EXPECT_GT(run.trained_auc, run.untrained_auc + 0.1);
  EXPECT_GT(run.trained_auc, data.planted.auc - 0.05);
}

// --dense_sync=allreduce: the workers' tables stay identical round after
// round (checked in every round), rank 0's end up on the servers, and the
// model learns as well as with its dense tables on the servers.
TEST(SparseTrainingTest, DenseTablesByAllreduceLearnAsWellAsOnTheServers) {
  const Data data = GenerateData("hybrid");
  const MlpRun servers = TrainEmbeddingMlpOn(data, 1);
  const MlpRun hybrid = TrainEmbeddingMlpOn(data, 1, /*allreduce=*/true);
  EXPECT_EQ(hybrid.w1_before, servers.w1_before);  // the same start
  EXPECT_NE(hybrid.w1_after, hybrid.w1_before);    // the servers' copy was written
  EXPECT_GT(hybrid.trained_auc, hybrid.untrained_auc + 0.1);
  EXPECT_NEAR(hybrid.trained_auc, servers.trained_auc, 0.02);
}

// The embedding MLP split by hidden units over K partitions (threads of one
// replica, --model_partitions): its tables end where the whole model's do,
// within float rounding (the partitions' logits are summed in float).
TEST(SparseTrainingTest, EmbeddingMlpPartitionsEndWhereTheWholeModelDoes) {
  const Data data = GenerateData("parts", 2);
  auto fields = OptimizerFields(OptimizerSpec());  // AdaGrad
  ASSERT_TRUE(fields.ok());
  EmbeddingMlpConfig model;
  model.prefix = "parts";
  model.num_buckets = 16;
  model.num_fields = 2;
  model.hidden = 10;  // 5 and 5, or 3, 3 and 4
  SparseTrainerConfig config;
  config.max_train_examples = 20000;
  config.batch_size = 64;
  std::vector<std::vector<float>> whole;
  double whole_logloss = 0;
  for (int k : {1, 2, 3}) {
    auto cluster = InProcessCluster::Start(2);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    auto admin = (*cluster)->Connect(100);
    for (const proto::TableDef& def : EmbeddingMlpTables(model, *fields)) {
      ASSERT_TRUE(admin->CreateTable(def).ok()) << def.name();
    }
    LocalGroup group(k, absl::Seconds(60));
    std::vector<std::thread> threads;
    std::vector<absl::StatusOr<SparseTrainStats>> stats(k);
    for (int p = 0; p < k; ++p) {
      threads.emplace_back([&, p] {
        auto client = (*cluster)->Connect(p);
        SparseTrainerConfig mine = config;
        if (k > 1) mine.partitions = group.Member(p);
        stats[p] = TrainEmbeddingMlp(*client, data.train, mine, model, NoProgress);
      });
    }
    for (auto& t : threads) t.join();
    for (int p = 0; p < k; ++p) {
      ASSERT_TRUE(stats[p].ok()) << "partition " << p << ": " << stats[p].status();
      EXPECT_EQ(stats[p]->steps, (20000 + 63) / 64);
      // Only partition 0 reads and writes the embedding rows.
      EXPECT_EQ(stats[p]->keys > 0, p == 0) << "partition " << p;
    }
    std::vector<std::vector<float>> tables;
    for (const char* name : {"w1", "b1", "w2", "b2"}) {
      const uint64_t n = std::string(name) == "w1"   ? 2 * 8 * 10
                         : std::string(name) == "b2" ? 1
                                                     : 10;
      std::vector<float>& t = tables.emplace_back(n);
      const PullRange op[] = {{std::string("parts/") + name, 0, n, absl::MakeSpan(t)}};
      ASSERT_TRUE(admin->Pull(op).ok());
    }
    const auto eval = EvaluateEmbeddingMlp(*admin, data.test, model, 1000);
    ASSERT_TRUE(eval.ok()) << eval.status();
    if (k == 1) {
      whole = tables;
      whole_logloss = eval->logloss;
      continue;
    }
    for (size_t t = 0; t < tables.size(); ++t) {
      double diff = 0, norm = 0;
      for (size_t i = 0; i < tables[t].size(); ++i) {
        diff += std::pow(double{tables[t][i]} - whole[t][i], 2);
        norm += std::pow(double{whole[t][i]}, 2);
      }
      EXPECT_LT(std::sqrt(diff / norm), 1e-4) << "K = " << k << ", table " << t;
    }
    EXPECT_NEAR(eval->logloss, whole_logloss, 1e-4 * whole_logloss) << "K = " << k;
    std::printf("embedding mlp, K = %d: test log-loss %.6f (whole model %.6f)\n", k, eval->logloss,
                whole_logloss);
  }
}

TEST(SparseTrainingTest, AnEmbeddingMlpWithFourFieldsLearnsThePlantedModel) {
  const Data data = GenerateData("fields", 4);
  const MlpRun run = TrainEmbeddingMlpOn(data, 4);
  EXPECT_GT(run.trained_auc, run.untrained_auc + 0.1);
  EXPECT_GT(run.trained_auc, data.planted.auc - 0.03);
  // Each field's inputs learned: the hidden layer's weights of every field's
  // sum moved. (Were the features all summed into one field, the other
  // fields' inputs would stay 0 and their weights would get no gradient.)
  ASSERT_EQ(run.w1_after.size(), run.w1_before.size());
  constexpr size_t kDim = 8, kInputs = 4 * kDim;
  for (size_t f = 0; f < 4; ++f) {
    double moved = 0;
    for (size_t i = 0; i < run.w1_after.size(); ++i) {
      if ((i % kInputs) / kDim == f) moved += std::abs(run.w1_after[i] - run.w1_before[i]);
    }
    EXPECT_GT(moved / (kDim * 16), 0.01) << "field " << f;  // the mean change per weight
    std::printf("field %zu: mean |change| of its hidden weights %.4f\n", f, moved / (kDim * 16));
  }
}

// A model with fewer fields than the data fails, naming the file and line,
// in training and in evaluation.
TEST(SparseTrainingTest, AFieldBeyondTheModelsFieldsIsAnError) {
  const Data data = GenerateData("narrow", 4);
  auto cluster = InProcessCluster::Start(1);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto fields = OptimizerFields(OptimizerSpec());
  ASSERT_TRUE(fields.ok()) << fields.status();
  EmbeddingMlpConfig model;
  model.prefix = "narrow";
  model.num_buckets = 8;
  model.num_fields = 2;
  auto client = (*cluster)->Connect(0);
  for (const proto::TableDef& def : EmbeddingMlpTables(model, *fields)) {
    ASSERT_TRUE(client->CreateTable(def).ok()) << def.name();
  }
  const auto trained =
      TrainEmbeddingMlp(*client, data.train, SparseTrainerConfig(), model, NoProgress);
  ASSERT_FALSE(trained.ok());
  EXPECT_EQ(trained.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(trained.status().message());
  EXPECT_EQ(message.rfind(data.train + ":", 0), 0u) << message;
  EXPECT_NE(message.find("but the model has 2 field(s) (--num_fields=2)"), std::string::npos)
      << message;
  const auto evaluated = EvaluateEmbeddingMlp(*client, data.test, model, 1000);
  ASSERT_FALSE(evaluated.ok());
  EXPECT_EQ(std::string(evaluated.status().message()).rfind(data.test + ":", 0), 0u)
      << evaluated.status();

  model.num_fields = 0;
  EXPECT_EQ(EvaluateEmbeddingMlp(*client, data.test, model, 1000).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
