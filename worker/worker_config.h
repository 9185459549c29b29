// What one ps_worker run does, as main() reads it from the flags: where the
// cluster is, the model and its data, the trainer's and the client's
// settings and the server-side optimizer. Plain data, no flags: the run
// functions (worker/run_worker.h) take it, so tests can build one by hand.
#ifndef PS_WORKER_WORKER_CONFIG_H_
#define PS_WORKER_WORKER_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/ps.pb.h"
#include "worker/client/ps_client.h"
#include "worker/train/averaging_trainer.h"
#include "worker/train/embedding_mlp.h"
#include "worker/train/sparse_trainer.h"
#include "worker/train/trainer.h"

namespace ps {

struct WorkerConfig {
  // The cluster: a static spec, or etcd's ring (then `servers` is empty).
  std::vector<std::string> servers;
  std::string etcd;
  std::string cluster;

  // "mlp" or "softmax" (IDX images), "sparse_lr" or "embedding_mlp" (LibSVM).
  std::string model = "mlp";
  std::vector<int> hidden;    // MLP hidden widths
  std::string table_prefix;   // "": the model's name
  proto::TableDef optimizer;  // the optimizer fields of every table

  // Dense models: the IDX directory.
  std::string data_dir;
  // Sparse models: the LibSVM files and their settings (the trainer's
  // fields other than the ones TrainerConfig also holds).
  std::string train_data;
  std::string test_data;
  bool evaluate = true;
  EmbeddingMlpConfig embedding;    // dim, hidden, num_fields, num_buckets
  SparseTrainerConfig sparse;      // skip_bad_lines, row cache, push_threshold
  int64_t max_train_examples = 0;  // 0: all

  TrainerConfig trainer;  // worker index and count, epochs, batch, consistency...
  // The algorithm (Downpour by default); for average and easgd, tau, alpha
  // and the local optimizer (`optimizer` then describes the local steps,
  // and the tables get AveragingTableOptimizer()).
  AveragingConfig averaging{Algorithm::kDownpour};
  PsClientOptions client;  // consistency, lease, timeout, placement, encoding
  // Dense models: workers trained as threads of this process (worker
  // worker_index * local_workers + j of num_workers * local_workers), and
  // whether they share one connection through a LocalAggregator (the
  // servers then see num_workers workers, this one with id worker_index).
  int local_workers = 1;
  bool local_aggregation = false;
  // BSP with the servers' deterministic reduction (PushRequest.reduce).
  bool bsp_reduce = false;
  bool eval_only = false;
  bool resume = false;
  // --dense_sync=allreduce (embedding_mlp): the MLP's dense tables are kept
  // by every worker and stepped together by allreduce among the job's
  // processes (WorkerEnv::workers, MPI); rank 0 writes them to the servers
  // every allreduce_publish_every steps and at the end; every
  // allreduce_check_every rounds (0: only at the end) the ranks check that
  // they hold the same bits.
  bool dense_allreduce = false;
  int allreduce_publish_every = 100;
  int allreduce_check_every = 0;
  // --model_partitions K (mlp): each model replica is K processes, each
  // owning 1/K of the units of every hidden layer (partition `partition`
  // of them, worker/train/partitioned_mlp.h); the replicas are
  // trainer.worker_index of trainer.num_workers.
  int model_partitions = 1;
  int partition = 0;
  // > 0: refuse to train when the model's parameters this process would
  // hold (values and gradient) exceed this many MiB.
  int64_t max_worker_memory_mb = 0;
  double wait_for_workers_seconds = 60;

  bool sparse_model() const { return model == "sparse_lr" || model == "embedding_mlp"; }
  std::string who() const {
    std::string w = "worker " + std::to_string(trainer.worker_index) + "/" +
                    std::to_string(trainer.num_workers);
    if (model_partitions > 1) {
      w += " partition " + std::to_string(partition) + "/" + std::to_string(model_partitions);
    }
    return w;
  }
};

}  // namespace ps

#endif  // PS_WORKER_WORKER_CONFIG_H_
