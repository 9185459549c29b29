#include "worker/run_worker.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/process_cpu.h"
#include "worker/client/local_aggregator.h"
#include "worker/run_common.h"
#include "worker/run_partition.h"
#include "worker/train/dataset.h"
#include "worker/train/dense_allreduce.h"
#include "worker/train/idx_reader.h"
#include "worker/train/model.h"

namespace ps {
namespace {

// Sparse models train asynchronously without a lease, as they always have:
// of config.client they take only the deadline, placement and traffic
// reduction.
PsClientOptions SparseClientBase(const PsClientOptions& client) {
  PsClientOptions base;
  base.timeout = client.timeout;
  base.placement = client.placement;
  base.value_encoding = client.value_encoding;
  base.key_list_caching = client.key_list_caching;
  return base;
}

// The servers' view of the pulls of this job's tables: staleness histogram
// (summed over tables and servers) and waiting.
void PrintServerStats(PsClient& client, const std::string& prefix) {
  auto stats = client.Stats();
  if (!stats.ok()) {
    std::printf("server stats unavailable: %s\n", std::string(stats.status().message()).c_str());
    return;
  }
  std::vector<uint64_t> histogram;
  uint64_t pulls = 0, wait_us = 0, wait_max = 0;
  for (const ServerStats& server : *stats) {
    for (const proto::TableStats& t : server.stats.tables()) {
      if (!absl::StartsWith(t.table(), prefix + "/")) continue;
      histogram.resize(std::max<size_t>(histogram.size(), t.staleness_histogram_size()), 0);
      for (int i = 0; i < t.staleness_histogram_size(); ++i) {
        histogram[i] += t.staleness_histogram(i);
      }
      pulls += t.pulls();
      wait_us += t.wait_us_total();
      wait_max = std::max<uint64_t>(wait_max, t.wait_us_max());
    }
  }
  std::printf(
      "servers: %llu pulls of '%s/*'; staleness histogram (rounds 0..16+): %s; "
      "waited %.2fs in all, longest %.3fs\n",
      static_cast<unsigned long long>(pulls), prefix.c_str(), absl::StrJoin(histogram, " ").c_str(),
      wait_us / 1e6, wait_max / 1e6);
}

// The optimizer fields of the job's tables: the optimizer flags' for
// Downpour; for averaging and EASGD, which keep the center in tables that
// add what is pushed, AveragingTableOptimizer() (the flags then drive the
// workers' local steps).
proto::TableDef TablesOptimizer(const WorkerConfig& config) {
  return config.averaging.algorithm == Algorithm::kDownpour ? config.optimizer
                                                            : AveragingTableOptimizer();
}

// ---- sparse models ----------------------------------------------------------

absl::Status CheckSparseConfig(const WorkerConfig& config) {
  const bool evaluate = config.evaluate || config.eval_only;
  if (config.test_data.empty() && evaluate) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model=", config.model, " needs --test_data (a LibSVM file), or --evaluate=false"));
  }
  if (config.train_data.empty() && !config.eval_only) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model=", config.model, " needs --train_data (a LibSVM file), or --eval_only"));
  }
  if (config.trainer.consistency != Consistency::kAsync) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model=", config.model, " trains asynchronously: use --consistency=async"));
  }
  if (config.model_partitions > 1 &&
      (config.model != "embedding_mlp" || config.averaging.algorithm != Algorithm::kDownpour)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model_partitions=", config.model_partitions,
        " splits hidden layers: it needs --model=mlp or embedding_mlp (not ", config.model,
        ") and --algorithm=downpour (not ", AlgorithmName(config.averaging.algorithm), ")"));
  }
  if (config.dense_allreduce &&
      (config.model != "embedding_mlp" || config.averaging.algorithm != Algorithm::kDownpour)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dense_sync=allreduce keeps embedding_mlp's dense layers on the workers: it needs "
        "--model=embedding_mlp (not ",
        config.model, ") and --algorithm=downpour (not ", AlgorithmName(config.averaging.algorithm),
        ")"));
  }
  return absl::OkStatus();
}

// The tables of a sparse model as the servers keep them: with
// --dense_sync=allreduce, the servers' copies of the dense ones
// (worker/train/dense_allreduce.h).
absl::StatusOr<std::vector<proto::TableDef>> SparseServerTables(const WorkerConfig& config,
                                                                const EmbeddingMlpConfig& emb) {
  const proto::TableDef optimizer = TablesOptimizer(config);
  std::vector<proto::TableDef> tables = config.model != "embedding_mlp"
                                            ? std::vector<proto::TableDef>{SparseLrTable(
                                                  emb.prefix + "/w", optimizer, emb.num_buckets)}
                                            : EmbeddingMlpTables(emb, optimizer);
  if (emb.tiered_cache_mb > 0) {  // the sparse table, first
    tables[0].set_storage(proto::STORAGE_TIERED);
    tables[0].set_cache_mb(emb.tiered_cache_mb);
  }
  if (config.model != "embedding_mlp") return tables;
  if (!config.dense_allreduce) return tables;
  absl::StatusOr<std::vector<proto::TableDef>> copies =
      ServerCopyTables({tables.begin() + 1, tables.end()});
  if (!copies.ok()) return copies.status();
  tables.resize(1);
  tables.insert(tables.end(), copies->begin(), copies->end());
  return tables;
}

absl::Status TrainSparse(const WorkerConfig& config, const WorkerEnv& env,
                         const EmbeddingMlpConfig& emb, const std::string& table,
                         PsClient& client) {
  SparseTrainerConfig sc = config.sparse;
  sc.table = table;
  sc.worker_index = config.trainer.worker_index;
  sc.num_workers = config.trainer.num_workers;
  sc.epochs = config.trainer.epochs;
  sc.batch_size = config.trainer.batch_size;
  sc.max_train_examples = config.max_train_examples;
  sc.progress_interval = config.trainer.progress_interval;
  sc.on_progress = ReportingSink(env.observer, &client, table.substr(0, table.rfind('/')));
  sc.averaging = config.averaging;
  sc.partitions = env.partitions;
  if (config.dense_allreduce) {
    sc.dense_allreduce.group = env.workers;
    sc.dense_allreduce.optimizer = config.optimizer;
    sc.dense_allreduce.publish_every = config.allreduce_publish_every;
    sc.dense_allreduce.check_every = config.allreduce_check_every;
  }
  auto stats = config.model == "embedding_mlp"
                   ? TrainEmbeddingMlp(client, config.train_data, sc, emb, PrintLine)
                   : TrainSparseLr(client, config.train_data, sc, PrintLine);
  const std::string who = config.who();
  if (!stats.ok()) return Prefixed(who + ": training failed: ", stats.status());
  client.Leave();
  std::printf(
      "%s: done: %lld steps, %lld examples in %.1fs (%.0f examples/s, %.0f keys/s, %lld keys "
      "pulled), last-epoch log-loss %.4f, %lld bad lines skipped\n",
      who.c_str(), static_cast<long long>(stats->steps), static_cast<long long>(stats->examples),
      stats->seconds, stats->examples_per_second, stats->keys_per_second,
      static_cast<long long>(stats->keys_pulled), stats->mean_loss_last_epoch,
      static_cast<long long>(stats->bad_lines));
  std::printf(
      "RESULT worker=%d partition=%d seconds=%.3f examples=%lld keys=%lld keys_pulled=%lld "
      "keys_pushed=%lld dense_bytes=%lld allreduce_rounds=%lld\n",
      config.trainer.worker_index, config.partition, stats->seconds,
      static_cast<long long>(stats->examples), static_cast<long long>(stats->keys),
      static_cast<long long>(stats->keys_pulled), static_cast<long long>(stats->keys_pushed),
      static_cast<long long>(stats->dense_bytes), static_cast<long long>(stats->allreduce_rounds));
  return absl::OkStatus();
}

absl::Status EvaluateSparse(const WorkerConfig& config, const WorkerEnv& env,
                            const EmbeddingMlpConfig& emb, const std::string& table,
                            PsClient& client) {
  auto eval = config.model == "embedding_mlp"
                  ? EvaluateEmbeddingMlp(client, config.test_data, emb, 4096)
                  : EvaluateSparseLr(client, config.test_data, table, 4096);
  if (!eval.ok()) return Prefixed(config.who() + ": evaluating: ", eval.status());
  std::printf("%s: test auc %.4f accuracy %.4f logloss %.4f (%lld test examples)\n",
              config.who().c_str(), eval->auc, eval->accuracy, eval->logloss,
              static_cast<long long>(eval->examples));
  std::printf("test auc %.4f accuracy %.4f\n", eval->auc, eval->accuracy);
  std::printf("RESULT test_auc=%.4f test_accuracy=%.4f\n", eval->auc, eval->accuracy);
  env.observer->Finish("auc", eval->auc);
  return absl::OkStatus();
}

// ---- dense models -----------------------------------------------------------

// Trains one worker's shard of `train` by Downpour SGD (or averaging):
// worker `trainer.worker_index` of `trainer.num_workers`, through `client`.
// Progress goes to `on_progress` when set; prints the worker's lines and its
// RESULT line (what it exchanged through `client`).
absl::Status TrainOneDense(const WorkerConfig& config, const TrainerConfig& trainer,
                           ProgressSink on_progress, const Model& model, const Dataset& train,
                           const TrainTestData& shape, ParamClient& client) {
  const std::string who = absl::StrCat("worker ", trainer.worker_index, "/", trainer.num_workers);
  const int64_t limit = config.max_train_examples;
  Dataset shard =
      ShardOf(limit > 0 ? Head(train, limit) : train, trainer.worker_index, trainer.num_workers);
  std::printf(
      "%s: %lld training examples of %dx%d images in %d classes, model %s (%lld parameters), "
      "%d server(s)\n",
      who.c_str(), static_cast<long long>(shard.num_examples), shape.rows, shape.cols,
      shard.num_classes, model.name().c_str(), static_cast<long long>(model.num_params()),
      client.num_servers());
  std::fflush(stdout);
  TrainerConfig run = trainer;
  run.on_progress = std::move(on_progress);
  const bool averaging = config.averaging.algorithm != Algorithm::kDownpour;
  auto stats = averaging ? TrainAveraging(client, model, shard, run, config.averaging, PrintLine)
                         : TrainDownpour(client, model, shard, run, PrintLine);
  if (!stats.ok()) return Prefixed(who + ": training failed: ", stats.status());
  std::printf(
      "%s: done: %lld steps, %lld examples in %.1fs (%.0f examples/s), last-epoch loss %.4f, "
      "staleness mean %.1f max %llu, clock lag max %llu, waited %.2fs (%.1f%% idle)\n",
      who.c_str(), static_cast<long long>(stats->steps), static_cast<long long>(stats->examples),
      stats->seconds, stats->examples_per_second, stats->mean_loss_last_epoch,
      stats->mean_staleness, static_cast<unsigned long long>(stats->max_staleness),
      static_cast<unsigned long long>(stats->max_clock_lag), stats->wait_seconds,
      stats->seconds > 0 ? 100.0 * stats->wait_seconds / stats->seconds : 0.0);
  std::printf("%s: clock lag histogram of its pulls (0..16+): %s\n", who.c_str(),
              absl::StrJoin(stats->clock_lag_histogram, " ").c_str());
  std::printf(
      "RESULT worker=%d seconds=%.3f wait_seconds=%.3f examples=%lld algorithm=%s pushes=%lld "
      "pulls=%lld value_bytes_pushed=%lld value_bytes_pulled=%lld peak_rss_mib=%.1f\n",
      trainer.worker_index, stats->seconds, stats->wait_seconds,
      static_cast<long long>(stats->examples), AlgorithmName(config.averaging.algorithm),
      static_cast<long long>(stats->pushes), static_cast<long long>(stats->pulls),
      static_cast<long long>(stats->values_pushed) * static_cast<long long>(sizeof(float)),
      static_cast<long long>(stats->values_pulled) * static_cast<long long>(sizeof(float)),
      ProcessPeakRssMib());
  std::fflush(stdout);
  return absl::OkStatus();
}

// Trains this process's workers on `train`: one, or config.local_workers
// threads, each through its own client (clients[j]) or all through a
// LocalAggregator over clients[0] (config.local_aggregation).
absl::Status TrainDense(const WorkerConfig& config, const WorkerEnv& env, const Model& model,
                        const Dataset& train, const TrainTestData& shape,
                        const std::vector<std::unique_ptr<PsClient>>& clients,
                        const std::vector<uint64_t>& start_clocks) {
  const TrainerConfig& trainer = config.trainer;
  const int k = config.local_workers;
  if (trainer.consistency != Consistency::kAsync) {
    // The servers count the aggregated workers as one.
    const int expected = config.local_aggregation ? trainer.num_workers : trainer.num_workers * k;
    for (const auto& client : clients) {
      const absl::Status s =
          client->WaitForWorkers(expected, absl::Seconds(config.wait_for_workers_seconds));
      if (!s.ok()) return Prefixed(config.who() + ": ", s);
    }
  }
  std::optional<LocalAggregator> aggregator;
  if (config.local_aggregation) aggregator.emplace(*clients[0], k);
  std::vector<absl::Status> status(k);
  auto train_one = [&](int j) {
    TrainerConfig mine = trainer;
    mine.worker_index = trainer.worker_index * k + j;
    mine.num_workers = trainer.num_workers * k;
    mine.start_clock = start_clocks[aggregator ? 0 : j];
    ParamClient& client = aggregator ? aggregator->member(j) : *clients[j];
    status[j] =
        TrainOneDense(config, mine,
                      j == 0 ? ReportingSink(env.observer, clients[0].get(), trainer.table_prefix)
                             : ProgressSink(),
                      model, train, shape, client);
    if (aggregator) {
      aggregator->Leave(j);
    } else {
      clients[j]->Leave();  // done: stop holding back the others
    }
  };
  if (k == 1) {
    train_one(0);
  } else {
    std::vector<std::thread> threads;
    for (int j = 0; j < k; ++j) threads.emplace_back(train_one, j);
    for (std::thread& t : threads) t.join();
  }
  if (aggregator) {
    clients[0]->Leave();
    std::printf(
        "RESULT host=%d local_workers=%d upstream_calls=%lld value_bytes_pushed=%lld "
        "value_bytes_pulled=%lld\n",
        trainer.worker_index, k, static_cast<long long>(aggregator->upstream_calls()),
        static_cast<long long>(aggregator->values_pushed()) * static_cast<long long>(sizeof(float)),
        static_cast<long long>(aggregator->values_pulled()) *
            static_cast<long long>(sizeof(float)));
  }
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  if (trainer.worker_index == 0) PrintServerStats(*clients[0], trainer.table_prefix);
  return absl::OkStatus();
}

absl::Status EvaluateDense(const WorkerConfig& config, const WorkerEnv& env, const Model& model,
                           const Dataset& test, PsClient& client) {
  std::vector<float> params(model.num_params());
  if (absl::Status s =
          PullParams(client, model, config.trainer.table_prefix, absl::MakeSpan(params));
      !s.ok()) {
    return Prefixed(config.who() + ": pulling final parameters: ", s);
  }
  const double accuracy = Accuracy(model, params, test);
  std::printf("%s: test accuracy %.4f (%lld test examples)\n", config.who().c_str(), accuracy,
              static_cast<long long>(test.num_examples));
  std::printf("RESULT test_accuracy=%.4f\n", accuracy);
  env.observer->Finish("accuracy", accuracy);
  return absl::OkStatus();
}

}  // namespace

absl::Status RunSparseWorker(WorkerConfig config, const WorkerEnv& env) {
  if (absl::Status s = CheckSparseConfig(config); !s.ok()) return s;
  if (config.optimizer.lars_eta() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lars_eta=", config.optimizer.lars_eta(),
                     ": LARS is for the dense models "
                     "(mlp, softmax), whose layers a worker pulls whole; --model=",
                     config.model, " keeps sparse tables"));
  }
  EmbeddingMlpConfig emb = config.embedding;
  emb.prefix = config.table_prefix.empty() ? config.model : config.table_prefix;
  emb.seed = config.trainer.seed;
  absl::StatusOr<std::vector<proto::TableDef>> tables = SparseServerTables(config, emb);
  if (!tables.ok()) return tables.status();
  // Partition P of replica r is worker r * K + P to the servers.
  const int id = config.trainer.worker_index * config.model_partitions + config.partition;
  auto client =
      ConnectAndCreate(ClientOptions(config, env, SparseClientBase(config.client), id), *tables);
  if (!client.ok()) return client.status();
  const std::string& table = (*tables)[0].name();
  if (!config.eval_only) {
    if (absl::Status s = TrainSparse(config, env, emb, table, **client); !s.ok()) return s;
  }
  if (!config.evaluate && !config.eval_only) return absl::OkStatus();
  // The ranks of an allreduce job hold one model, the partitions of a
  // replica one: rank 0, or partition 0, evaluates it.
  if (config.dense_allreduce && !config.eval_only && config.trainer.worker_index != 0) {
    return absl::OkStatus();
  }
  if (config.partition != 0) return absl::OkStatus();
  return EvaluateSparse(config, env, emb, table, **client);
}

absl::Status RunDenseWorker(WorkerConfig config, const WorkerEnv& env) {
  // Both sets, even to only evaluate: the class count (1 + the largest label
  // in either) fixes the model's shape, which every worker must agree on.
  auto data = ReadIdxDir(config.data_dir);
  if (!data.ok()) return Prefixed("--data_dir: ", data.status());
  auto model = MakeModel(config.model, data->train.dim, config.hidden, data->train.num_classes);
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model: ", model.status().message(), " (the data set has ", data->rows, "x",
                     data->cols, " images in ", data->train.num_classes, " classes)"));
  }
  config.trainer.table_prefix =
      config.table_prefix.empty() ? (*model)->name() : config.table_prefix;
  if (config.optimizer.lars_eta() > 0) {
    if (config.averaging.algorithm != Algorithm::kDownpour) {
      return absl::InvalidArgumentError(absl::StrCat("--lars_eta=", config.optimizer.lars_eta(),
                                                     ": LARS scales the servers' steps, so it "
                                                     "needs --algorithm=downpour, not ",
                                                     AlgorithmName(config.averaging.algorithm)));
    }
    config.trainer.layer_norms = true;  // the weight tables need them
  }
  const std::vector<int> widths = MlpWidths(config, *data);
  if (!config.eval_only) {
    if (absl::Status s = CheckWorkerMemory(config, **model, widths); !s.ok()) return s;
  }
  if (config.model_partitions > 1) {
    if (config.model != "mlp") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--model_partitions=", config.model_partitions,
          " splits hidden layers: it needs --model=mlp or embedding_mlp, not ", config.model));
    }
    return RunPartition(config, env, **model, *data, widths);
  }
  const auto tables = ModelTables(**model, config.trainer.table_prefix, TablesOptimizer(config),
                                  config.trainer.seed);
  // One connection, or one per local worker (ids worker_index * K + j).
  const int k = config.local_workers;
  const int connections = config.local_aggregation || config.eval_only ? 1 : k;
  std::vector<std::unique_ptr<PsClient>> clients;
  std::vector<uint64_t> start_clocks(connections, 0);
  for (int j = 0; j < connections; ++j) {
    const int id =
        connections == 1 ? config.trainer.worker_index : config.trainer.worker_index * k + j;
    PsClientOptions options = ClientOptions(config, env, config.client, id);
    if (config.bsp_reduce) {
      // The logical workers this connection's pushes sum: its own, or its
      // host's under local aggregation.
      const bool host = config.local_aggregation;
      options.reduce.set_first(static_cast<uint32_t>(host ? config.trainer.worker_index * k : id));
      options.reduce.set_size(static_cast<uint32_t>(host ? k : 1));
    }
    auto client = ConnectAndCreate(options, tables);
    if (!client.ok()) return client.status();
    clients.push_back(*std::move(client));
    if (!config.eval_only && config.resume) {
      absl::StatusOr<uint64_t> clock = ResumeClock(*clients[j], tables, config.who());
      if (!clock.ok()) return Prefixed(config.who() + ": --resume: ", clock.status());
      start_clocks[j] = *clock;
    }
  }
  if (!config.eval_only) {
    if (absl::Status s =
            TrainDense(config, env, **model, data->train, *data, clients, start_clocks);
        !s.ok()) {
      return s;
    }
  }
  return EvaluateDense(config, env, **model, data->test, *clients[0]);
}

}  // namespace ps
