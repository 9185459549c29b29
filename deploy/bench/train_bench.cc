// train_bench: the ps_worker training loop (Downpour SGD, same model, data,
// optimizer and defaults) against a parameter store in this process instead
// of a cluster. Its examples/s is the baseline for the cost of distribution.
//
//   train_bench --epochs=1 --threads=1
//
// Prints progress lines and `RESULT mode=local ... examples_per_second=...`.
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "common/process_tuning.h"
#include "deploy/bench/local_param_client.h"
#include "worker/train/dataset.h"
#include "worker/train/idx_reader.h"
#include "worker/train/model.h"
#include "worker/train/trainer.h"

ABSL_FLAG(int, epochs, 1, "passes over the training set");
ABSL_FLAG(int, batch_size, 32, "examples per mini-batch");
ABSL_FLAG(int, workers, 1, "training threads sharing the store (each its own data shard)");
ABSL_FLAG(double, learning_rate, 0.05, "AdaGrad learning rate");
ABSL_FLAG(int, n_sync, 1, "pull and push every n_sync steps");
ABSL_FLAG(bool, overlap, true, "overlap the store's push and pull with computation");
ABSL_FLAG(std::string, data_dir, "/usr/share/datasets/fashion-mnist", "Fashion-MNIST directory");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  ps::TuneProcessForDataPath();
  auto train = ps::ReadFashionMnist(absl::GetFlag(FLAGS_data_dir), true);
  auto test = ps::ReadFashionMnist(absl::GetFlag(FLAGS_data_dir), false);
  if (!train.ok() || !test.ok()) {
    std::fprintf(stderr, "train_bench: %s\n",
                 std::string((train.ok() ? test.status() : train.status()).message()).c_str());
    return 1;
  }
  auto model = ps::MakeMlp(train->dim, {256, 128}, train->num_classes);
  ps::proto::TableDef optimizer;
  optimizer.set_optimizer(ps::proto::OPT_ADAGRAD);
  optimizer.set_learning_rate(absl::GetFlag(FLAGS_learning_rate));
  optimizer.set_initial_accumulator(0.1f);
  optimizer.set_epsilon(1e-8f);
  ps::LocalParamClient store;
  if (absl::Status s = ps::CreateModelTables(store, ps::ModelTables(*model, "mlp", optimizer, 1));
      !s.ok()) {
    std::fprintf(stderr, "train_bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const int workers = absl::GetFlag(FLAGS_workers);
  std::vector<absl::StatusOr<ps::TrainStats>> stats(workers, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      ps::TrainerConfig config;
      config.worker_index = w;
      config.num_workers = workers;
      config.epochs = absl::GetFlag(FLAGS_epochs);
      config.batch_size = absl::GetFlag(FLAGS_batch_size);
      config.table_prefix = "mlp";
      config.n_fetch = config.n_push = absl::GetFlag(FLAGS_n_sync);
      config.overlap = absl::GetFlag(FLAGS_overlap);
      stats[w] = ps::TrainDownpour(store, *model, ps::ShardOf(*train, w, workers), config,
                                   [](const std::string& line) {
                                     std::printf("%s\n", line.c_str());
                                     std::fflush(stdout);
                                   });
    });
  }
  for (auto& t : threads) t.join();
  double examples_per_second = 0, seconds = 0;
  for (int w = 0; w < workers; ++w) {
    if (!stats[w].ok()) {
      std::fprintf(stderr, "train_bench: worker %d: %s\n", w,
                   std::string(stats[w].status().message()).c_str());
      return 1;
    }
    examples_per_second += stats[w]->examples_per_second;
    seconds = std::max(seconds, stats[w]->seconds);
  }
  std::vector<float> params(model->num_params());
  if (absl::Status s = ps::PullParams(store, *model, "mlp", absl::MakeSpan(params)); !s.ok()) {
    std::fprintf(stderr, "train_bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::printf(
      "RESULT mode=local workers=%d batch_size=%d epochs=%d n_sync=%d overlap=%d "
      "examples_per_second=%.1f test_accuracy=%.4f train_seconds=%.1f\n",
      workers, absl::GetFlag(FLAGS_batch_size), absl::GetFlag(FLAGS_epochs),
      absl::GetFlag(FLAGS_n_sync), absl::GetFlag(FLAGS_overlap) ? 1 : 0, examples_per_second,
      ps::Accuracy(*model, params, *test), seconds);
  return 0;
}
