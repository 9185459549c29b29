// partition_divergence: how far the parameters of the MLP trained in K model
// partitions (worker/train/partitioned_mlp.h, K threads) drift from the
// whole model's (TrainDownpour), both against a parameter store in this
// process, on Fashion-MNIST with ps_worker's defaults (AdaGrad 0.05, batch
// 32), after each of several step counts. The control (printed as k=0) is
// the whole model again, with each example's brightest pixel 1e-6 larger
// (relative): it shows how much a difference at float precision grows on
// its own.
//
//   partition_divergence --hidden=4096,4096 --steps=25,50,100,150,200 --partitions=1,2,4
//
// Prints `RESULT steps=S k=K max_table_rel_diff=D` lines, D being the
// largest over the tables of |theirs - whole| / |whole| (L2 norms); k=0 is
// the control.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "deploy/bench/local_param_client.h"
#include "worker/collective/local_collective.h"
#include "worker/train/idx_reader.h"
#include "worker/train/model.h"
#include "worker/train/partitioned_mlp.h"
#include "worker/train/trainer.h"

ABSL_FLAG(std::string, hidden, "4096,4096", "hidden layer widths");
ABSL_FLAG(std::string, steps, "25,50,100,150,200", "step counts to compare after");
ABSL_FLAG(std::string, partitions, "1,2,4", "partition counts K");
ABSL_FLAG(double, learning_rate, 0.05, "AdaGrad learning rate");
ABSL_FLAG(std::string, data_dir, "/usr/share/datasets/fashion-mnist", "Fashion-MNIST directory");

namespace {

std::vector<int> Ints(const std::string& text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 1) {
      std::fprintf(stderr, "partition_divergence: '%s' is not a positive integer\n",
                   std::string(part).c_str());
      std::exit(2);
    }
    out.push_back(v);
  }
  return out;
}

// Trains `steps` steps from the tables' seeded start (k = 0: the whole
// model by TrainDownpour, k > 0: k partitions) and returns every table's
// values.
std::vector<float> Train(const ps::Model& model, const std::vector<int>& widths,
                         const ps::Dataset& data, int steps, int k) {
  ps::proto::TableDef optimizer;
  optimizer.set_optimizer(ps::proto::OPT_ADAGRAD);
  optimizer.set_learning_rate(static_cast<float>(absl::GetFlag(FLAGS_learning_rate)));
  optimizer.set_initial_accumulator(0.1f);
  optimizer.set_epsilon(1e-8f);
  ps::LocalParamClient store;
  if (!ps::CreateModelTables(store, ps::ModelTables(model, "mlp", optimizer, 1)).ok()) std::abort();
  ps::TrainerConfig config;
  config.batch_size = 32;
  config.epochs = 1000;
  config.max_steps = steps;
  config.table_prefix = "mlp";
  config.progress_interval = absl::Hours(1);
  if (k <= 0) {
    if (!ps::TrainDownpour(store, model, data, config, nullptr).ok()) std::abort();
  } else {
    ps::LocalGroup group(k, absl::Minutes(10));
    std::vector<std::thread> partitions;
    for (int p = 0; p < k; ++p) {
      partitions.emplace_back([&, p] {
        auto stats = ps::TrainPartitionedMlp(store, widths, data, config, group.Member(p), nullptr);
        if (!stats.ok()) {
          std::fprintf(stderr, "partition %d: %s\n", p,
                       std::string(stats.status().message()).c_str());
          std::abort();
        }
      });
    }
    for (std::thread& t : partitions) t.join();
  }
  std::vector<float> params(model.num_params());
  if (!ps::PullParams(store, model, "mlp", absl::MakeSpan(params)).ok()) std::abort();
  return params;
}

double MaxTableDiff(const ps::Model& model, const std::vector<float>& a,
                    const std::vector<float>& whole) {
  double worst = 0;
  int64_t at = 0;
  for (const ps::ParamBlock& block : model.blocks()) {
    double diff = 0, norm = 0;
    for (int64_t i = at; i < at + block.size; ++i) {
      diff += std::pow(double{a[i]} - whole[i], 2);
      norm += std::pow(double{whole[i]}, 2);
    }
    worst = std::max(worst, std::sqrt(diff / norm));
    at += block.size;
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto train = ps::ReadFashionMnist(absl::GetFlag(FLAGS_data_dir), true);
  if (!train.ok()) {
    std::fprintf(stderr, "partition_divergence: %s\n",
                 std::string(train.status().message()).c_str());
    return 1;
  }
  const std::vector<int> hidden = Ints(absl::GetFlag(FLAGS_hidden));
  std::vector<int> widths = {train->dim};
  widths.insert(widths.end(), hidden.begin(), hidden.end());
  widths.push_back(train->num_classes);
  auto model = ps::MakeMlp(train->dim, hidden, train->num_classes);
  // Every example's brightest pixel, 1e-6 relative brighter.
  ps::Dataset nudged = *train;
  for (int64_t i = 0; i < nudged.num_examples; ++i) {
    float* row = nudged.features.data() + i * nudged.dim;
    *std::max_element(row, row + nudged.dim) *= 1.000001f;
  }
  for (int steps : Ints(absl::GetFlag(FLAGS_steps))) {
    const std::vector<float> whole = Train(*model, widths, *train, steps, 0);
    std::printf("RESULT steps=%d k=0 max_table_rel_diff=%.3g\n", steps,
                MaxTableDiff(*model, Train(*model, widths, nudged, steps, 0), whole));
    for (int k : Ints(absl::GetFlag(FLAGS_partitions))) {
      const std::vector<float> split = Train(*model, widths, *train, steps, k);
      std::printf("RESULT steps=%d k=%d max_table_rel_diff=%.3g\n", steps, k,
                  MaxTableDiff(*model, split, whole));
      std::fflush(stdout);
    }
  }
  return 0;
}
