// The two kinds of ps_worker runs, each from a WorkerConfig: a dense model
// (MLP, softmax) on IDX images by Downpour SGD, and a sparse one (sparse
// logistic regression, the embedding MLP) on LibSVM files. Each connects,
// creates the model's tables, trains, evaluates and prints its results;
// progress goes to `observer` and the lines to stdout.
//
// Not thread-safe: one run per process at a time.
#ifndef PS_WORKER_RUN_WORKER_H_
#define PS_WORKER_RUN_WORKER_H_

#include <memory>

#include "absl/status/status.h"
#include "worker/client/shard_directory.h"
#include "worker/collective/collective.h"
#include "worker/train/training_observer.h"
#include "worker/worker_config.h"

namespace ps {

// What a run uses besides its config: the ring's directory (null: the
// static `config.servers`) and where progress goes. Owned by the caller.
struct WorkerEnv {
  std::shared_ptr<const ShardDirectory> directory;
  TrainingObserver* observer = nullptr;
  // The job's workers (--dense_sync=allreduce) and this replica's
  // partitions (--model_partitions > 1): worker/worker_group.h.
  Collective* workers = nullptr;
  Collective* partitions = nullptr;
};

// --model=mlp or softmax. Errors name the flag or the worker and step.
absl::Status RunDenseWorker(WorkerConfig config, const WorkerEnv& env);
// --model=sparse_lr or embedding_mlp (asynchronous only); embedding_mlp's
// dense tables by allreduce with config.dense_allreduce (env.workers set).
absl::Status RunSparseWorker(WorkerConfig config, const WorkerEnv& env);

}  // namespace ps

#endif  // PS_WORKER_RUN_WORKER_H_
