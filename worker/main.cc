// ps_worker: one Downpour SGD model replica.
//
//   ps_worker --servers=h0:p0,h1:p1 --worker_index=0 --num_workers=4 --model=mlp
//
// Reads its shard of Fashion-MNIST (every num_workers-th example, starting at
// worker_index), creates the model's tables if they do not exist, trains, and
// evaluates test accuracy with the parameters on the servers at its end.
// --eval_only skips training (used by the launcher once all workers are done).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/cluster_spec.h"
#include "common/process_tuning.h"
#include "worker/dataset.h"
#include "worker/idx_reader.h"
#include "worker/model.h"
#include "worker/ps_client.h"
#include "worker/trainer.h"

ABSL_FLAG(std::string, servers, "", "cluster spec: comma-separated host:port of every server");
ABSL_FLAG(int, worker_index, 0, "this worker's index in [0, num_workers)");
ABSL_FLAG(int, num_workers, 1, "number of workers sharing the data");
ABSL_FLAG(std::string, model, "mlp", "mlp or softmax");
ABSL_FLAG(std::string, hidden, "256,128", "MLP hidden layer widths, comma-separated");
ABSL_FLAG(int, epochs, 3, "passes over this worker's shard");
ABSL_FLAG(int, batch_size, 32, "examples per mini-batch");
ABSL_FLAG(int, n_fetch, 1, "pull parameters every n_fetch steps");
ABSL_FLAG(int, n_push, 1, "push accumulated gradients every n_push steps");
ABSL_FLAG(bool, overlap, true,
          "push and pull in the background while computing the next round "
          "(needs n_fetch == n_push)");
ABSL_FLAG(std::string, optimizer, "adagrad", "server-side optimizer: adagrad or sgd");
ABSL_FLAG(double, learning_rate, 0.05, "optimizer learning rate");
ABSL_FLAG(double, initial_accumulator, 0.1, "AdaGrad initial accumulator");
ABSL_FLAG(double, epsilon, 1e-8, "AdaGrad epsilon");
ABSL_FLAG(uint64_t, seed, 1, "seed for initialization and shuffling");
ABSL_FLAG(std::string, data_dir, "/usr/share/datasets/fashion-mnist",
          "directory with the Fashion-MNIST *-idx?-ubyte.gz files");
ABSL_FLAG(int64_t, max_train_examples, 0, "use only the first N training examples (0: all)");
ABSL_FLAG(std::string, table_prefix, "", "table name prefix (default: the model name)");
ABSL_FLAG(double, progress_seconds, 5, "seconds between progress lines");
ABSL_FLAG(double, timeout_seconds, 10, "deadline of each RPC attempt");
ABSL_FLAG(uint64_t, slice_size, 4096, "keys per slice (must match the servers)");
ABSL_FLAG(int, virtual_nodes, 512, "virtual nodes per server (must match the servers)");
ABSL_FLAG(bool, eval_only, false, "skip training; only evaluate the servers' parameters");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "ps_worker: %s\n", message.c_str());
  return 1;
}

absl::StatusOr<std::vector<int>> ParseHidden(const std::string& text) {
  std::vector<int> widths;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int w = 0;
    if (!absl::SimpleAtoi(part, &w) || w < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--hidden=", text, ": '", part, "' is not a positive width"));
    }
    widths.push_back(w);
  }
  return widths;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Downpour SGD worker. See the README.");
  absl::ParseCommandLine(argc, argv);
  ps::TuneProcessForDataPath();

  auto spec = ps::ClusterSpec::Parse(absl::GetFlag(FLAGS_servers));
  if (!spec.ok()) return Fail(absl::StrCat("--servers: ", spec.status().message()));
  auto hidden = ParseHidden(absl::GetFlag(FLAGS_hidden));
  if (!hidden.ok()) return Fail(std::string(hidden.status().message()));

  ps::TrainerConfig config;
  config.worker_index = absl::GetFlag(FLAGS_worker_index);
  config.num_workers = absl::GetFlag(FLAGS_num_workers);
  config.epochs = absl::GetFlag(FLAGS_epochs);
  config.batch_size = absl::GetFlag(FLAGS_batch_size);
  config.n_fetch = absl::GetFlag(FLAGS_n_fetch);
  config.n_push = absl::GetFlag(FLAGS_n_push);
  config.overlap = absl::GetFlag(FLAGS_overlap) && config.n_fetch == config.n_push;
  config.seed = absl::GetFlag(FLAGS_seed);
  config.progress_interval = absl::Seconds(absl::GetFlag(FLAGS_progress_seconds));
  if (absl::Status s = ps::ValidateTrainerConfig(config); !s.ok()) {
    return Fail(absl::StrCat("flags: ", s.message()));
  }

  ps::proto::TableDef optimizer;
  const std::string opt = absl::GetFlag(FLAGS_optimizer);
  if (opt == "adagrad") {
    optimizer.set_optimizer(ps::proto::OPT_ADAGRAD);
  } else if (opt == "sgd") {
    optimizer.set_optimizer(ps::proto::OPT_SGD);
  } else {
    return Fail(absl::StrCat("--optimizer=", opt, ": expected adagrad or sgd"));
  }
  optimizer.set_learning_rate(absl::GetFlag(FLAGS_learning_rate));
  if (opt == "adagrad") {
    optimizer.set_initial_accumulator(absl::GetFlag(FLAGS_initial_accumulator));
    optimizer.set_epsilon(absl::GetFlag(FLAGS_epsilon));
  }

  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  auto test = ps::ReadFashionMnist(data_dir, /*train=*/false);
  if (!test.ok()) return Fail(std::string(test.status().message()));
  auto model = ps::MakeModel(absl::GetFlag(FLAGS_model), test->dim, *hidden, test->num_classes);
  if (!model.ok()) return Fail(absl::StrCat("--model: ", model.status().message()));
  config.table_prefix = absl::GetFlag(FLAGS_table_prefix).empty()
                            ? (*model)->name()
                            : absl::GetFlag(FLAGS_table_prefix);

  ps::PsClientOptions client_options;
  client_options.servers = spec->servers;
  client_options.worker_id = static_cast<uint32_t>(config.worker_index);
  client_options.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_seconds));
  client_options.placement.slice_size = absl::GetFlag(FLAGS_slice_size);
  client_options.placement.virtual_nodes = absl::GetFlag(FLAGS_virtual_nodes);
  auto client = ps::PsClient::Connect(client_options);
  if (!client.ok()) return Fail(std::string(client.status().message()));

  const auto tables = ps::ModelTables(**model, config.table_prefix, optimizer, config.seed);
  for (const auto& def : tables) {
    if (absl::Status s = (*client)->CreateTable(def); !s.ok()) {
      return Fail(absl::StrCat("creating table '", def.name(), "': ", s.message()));
    }
  }

  const std::string who = absl::StrCat("worker ", config.worker_index, "/", config.num_workers);
  if (!absl::GetFlag(FLAGS_eval_only)) {
    auto train = ps::ReadFashionMnist(data_dir, /*train=*/true);
    if (!train.ok()) return Fail(std::string(train.status().message()));
    const int64_t limit = absl::GetFlag(FLAGS_max_train_examples);
    ps::Dataset shard = ps::ShardOf(limit > 0 ? ps::Head(*train, limit) : *train,
                                    config.worker_index, config.num_workers);
    std::printf("%s: %lld training examples, model %s (%lld parameters), %d server(s)\n",
                who.c_str(), static_cast<long long>(shard.num_examples), (*model)->name().c_str(),
                static_cast<long long>((*model)->num_params()), (*client)->num_servers());
    std::fflush(stdout);
    auto stats = ps::TrainDownpour(**client, **model, shard, config, [](const std::string& line) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    });
    if (!stats.ok())
      return Fail(absl::StrCat(who, ": training failed: ", stats.status().message()));
    std::printf(
        "%s: done: %lld steps, %lld examples in %.1fs (%.0f examples/s), last-epoch loss %.4f, "
        "staleness mean %.1f max %llu\n",
        who.c_str(), static_cast<long long>(stats->steps), static_cast<long long>(stats->examples),
        stats->seconds, stats->examples_per_second, stats->mean_loss_last_epoch,
        stats->mean_staleness, static_cast<unsigned long long>(stats->max_staleness));
  }

  std::vector<float> params((*model)->num_params());
  if (absl::Status s =
          ps::PullParams(**client, **model, config.table_prefix, absl::MakeSpan(params));
      !s.ok()) {
    return Fail(absl::StrCat(who, ": pulling final parameters: ", s.message()));
  }
  const double accuracy = ps::Accuracy(**model, params, *test);
  std::printf("%s: test accuracy %.4f (%lld test examples)\n", who.c_str(), accuracy,
              static_cast<long long>(test->num_examples));
  std::printf("RESULT test_accuracy=%.4f\n", accuracy);
  return 0;
}
