#include "worker/run_partition.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/process_cpu.h"
#include "worker/run_common.h"
#include "worker/train/partitioned_mlp.h"
#include "worker/train/trainer.h"

namespace ps {

std::vector<int> MlpWidths(const WorkerConfig& config, const TrainTestData& data) {
  std::vector<int> widths = {data.train.dim};
  widths.insert(widths.end(), config.hidden.begin(), config.hidden.end());
  widths.push_back(data.train.num_classes);
  return widths;
}

absl::Status CheckWorkerMemory(const WorkerConfig& config, const Model& model,
                               const std::vector<int>& widths) {
  if (config.max_worker_memory_mb <= 0) return absl::OkStatus();
  int64_t held = model.num_params() * config.local_workers;
  if (config.model_partitions > 1) {
    absl::StatusOr<MlpPartition> part =
        MlpPartition::Make(widths, config.model_partitions, config.partition);
    if (!part.ok()) return part.status();
    held = part->ParamsHeld();
  }
  constexpr double kMiB = 1 << 20;
  const double mb = 8.0 * held / kMiB, total = 8.0 * model.num_params() / kMiB;
  if (mb <= config.max_worker_memory_mb) return absl::OkStatus();
  const int64_t k = static_cast<int64_t>(std::ceil(total / config.max_worker_memory_mb));
  return absl::ResourceExhaustedError(absl::StrFormat(
      "--max_worker_memory_mb=%d: this process would hold %.1f MiB of the model's parameters "
      "(%d values and their gradients; the whole %s model is %.1f MiB), over the limit; split "
      "the model over more processes with --model_partitions (about %d or more, under mpirun "
      "or srun)",
      config.max_worker_memory_mb, mb, held, model.name(), total, k));
}

absl::Status RunPartition(const WorkerConfig& config, const WorkerEnv& env, const Model& model,
                          const TrainTestData& data, const std::vector<int>& widths) {
  const TrainerConfig& trainer = config.trainer;
  const std::string who = config.who();
  if (env.partitions == nullptr || env.partitions->size() != config.model_partitions) {
    return absl::FailedPreconditionError(
        absl::StrCat(who, ": --model_partitions=", config.model_partitions,
                     " needs the processes of the replica: launch replicas * ",
                     config.model_partitions, " processes with mpirun or srun"));
  }
  if (config.local_workers > 1 || config.local_aggregation || config.bsp_reduce ||
      trainer.overlap || trainer.layer_norms || trainer.n_fetch != 1 || trainer.n_push != 1 ||
      config.averaging.algorithm != Algorithm::kDownpour) {
    return absl::InvalidArgumentError(
        "--model_partitions trains by Downpour with a pull and a push every step: it does not "
        "combine with --local_workers, --local_aggregation, --bsp_reduce, --overlap, --lars_eta, "
        "--n_fetch/--n_push other than 1, or --algorithm other than downpour");
  }
  const int k = config.model_partitions;
  const int id = trainer.worker_index * k + config.partition;
  const std::vector<proto::TableDef> tables =
      ModelTables(model, trainer.table_prefix, config.optimizer, trainer.seed);
  auto client = ConnectAndCreate(ClientOptions(config, env, config.client, id), tables);
  if (!client.ok()) return client.status();
  TrainerConfig run = trainer;
  run.on_progress = ReportingSink(env.observer, client->get(), trainer.table_prefix);
  if (!config.eval_only) {
    if (config.resume) {
      absl::StatusOr<uint64_t> clock = ResumeClock(**client, tables, who);
      if (!clock.ok()) return Prefixed(who + ": --resume: ", clock.status());
      run.start_clock = *clock;
    }
    if (trainer.consistency != Consistency::kAsync) {
      const absl::Status s = (*client)->WaitForWorkers(
          trainer.num_workers * k, absl::Seconds(config.wait_for_workers_seconds));
      if (!s.ok()) return Prefixed(who + ": ", s);
    }
    const int64_t limit = config.max_train_examples;
    const Dataset shard = ShardOf(limit > 0 ? Head(data.train, limit) : data.train,
                                  trainer.worker_index, trainer.num_workers);
    auto stats = TrainPartitionedMlp(**client, widths, shard, run, env.partitions, PrintLine);
    if (!stats.ok()) return Prefixed(who + ": training failed: ", stats.status());
    (*client)->Leave();
    std::printf(
        "%s: done: %lld steps, %lld examples in %.1fs (%.0f examples/s), last-epoch loss %.4f\n",
        who.c_str(), static_cast<long long>(stats->steps), static_cast<long long>(stats->examples),
        stats->seconds, stats->examples_per_second, stats->mean_loss_last_epoch);
    std::printf(
        "RESULT worker=%d partition=%d partitions=%d seconds=%.3f examples=%lld steps=%lld "
        "params_held=%lld params_total=%lld value_bytes_pulled=%lld value_bytes_pushed=%lld "
        "activation_bytes=%lld peak_rss_mib=%.1f\n",
        trainer.worker_index, config.partition, k, stats->seconds,
        static_cast<long long>(stats->examples), static_cast<long long>(stats->steps),
        static_cast<long long>(stats->params_held), static_cast<long long>(model.num_params()),
        static_cast<long long>(stats->values_pulled) * 4,
        static_cast<long long>(stats->values_pushed) * 4,
        static_cast<long long>(stats->activation_values) * 4, ProcessPeakRssMib());
    std::fflush(stdout);
  }
  if (trainer.worker_index != 0) return absl::OkStatus();
  absl::StatusOr<double> accuracy =
      PartitionedMlpAccuracy(**client, widths, data.test, trainer.table_prefix, env.partitions);
  if (!accuracy.ok()) return Prefixed(who + ": evaluating: ", accuracy.status());
  if (config.partition != 0) return absl::OkStatus();
  std::printf("%s: test accuracy %.4f (%lld test examples)\n", who.c_str(), *accuracy,
              static_cast<long long>(data.test.num_examples));
  std::printf("RESULT test_accuracy=%.4f\n", *accuracy);
  env.observer->Finish("accuracy", *accuracy);
  return absl::OkStatus();
}

}  // namespace ps
