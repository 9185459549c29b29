// Sparse logistic regression on a parameter server (the PS paper's sparse
// LR): one weight per feature id in a sparse table, plus a bias (the
// reserved key kBiasKey). Each step a worker reads a minibatch of LibSVM
// examples (its share: example i goes to worker i mod num_workers), pulls
// the weights of only the keys the minibatch uses, computes the gradient of
// the log-loss, and pushes it for those keys only (summed over the batch:
// each key's gradient is that of the examples that have it, so rare features
// are not diluted). Asynchronous (Downpour): the push is stamped with the
// step number as the worker's clock, which drives the table's schedule.
#ifndef PS_WORKER_TRAIN_SPARSE_TRAINER_H_
#define PS_WORKER_TRAIN_SPARSE_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/ps.pb.h"
#include "worker/client/ps_client.h"
#include "worker/train/averaging_trainer.h"
#include "worker/train/dense_allreduce.h"
#include "worker/train/libsvm_reader.h"
#include "worker/train/progress.h"
#include "worker/train/row_io.h"
#include "worker/train/sparse_row_io.h"

namespace ps {

// The bias's key in the weight table (a hashed feature id equal to it would
// share the bias's weight: one chance in 2^64 per feature).
inline constexpr uint64_t kBiasKey = ~uint64_t{0};

// The weight table: sparse, width 1, zeros, with the optimizer fields of
// `optimizer` (see worker/client/optimizer_spec.h) and `num_buckets` slices.
proto::TableDef SparseLrTable(const std::string& name, const proto::TableDef& optimizer,
                              uint32_t num_buckets);

struct SparseTrainerConfig {
  std::string table = "sparse_lr/w";
  int worker_index = 0;
  int num_workers = 1;
  int epochs = 1;
  int batch_size = 256;
  // Examples of the whole file (before sharding) read per epoch; 0: all.
  int64_t max_train_examples = 0;
  // Skip malformed lines (counted) instead of failing.
  bool skip_bad_lines = false;
  // (Both models.) > 0: rows pulled at step c are reused until step c + row_cache_staleness
  // (worker/train/row_cache.h), at most row_cache_rows of them; only the
  // other keys are pulled. The pushes are not affected.
  uint64_t row_cache_staleness = 0;
  size_t row_cache_rows = 1 << 20;
  // > 0: the significantly-modified filter (worker/train/update_filter.h):
  // a key's gradient is held back until its sum since its last push reaches
  // this much; at most filter_rows keys are held, and all are pushed at the
  // end.
  float push_threshold = 0;
  size_t filter_rows = 1 << 20;
  absl::Duration progress_interval = absl::Seconds(5);
  // Gets each progress line's numbers too (when set).
  ProgressSink on_progress;
  // Downpour (the default: SparseRowIo, with the row cache and the filter),
  // or model averaging or EASGD (AveragingRows for every table; the tables
  // then need AveragingTableOptimizer()'s fields, and the row cache and the
  // filter stay off).
  AveragingConfig averaging{Algorithm::kDownpour};
  // (embedding_mlp) With a group: the MLP's dense tables are kept by every
  // worker and stepped together by allreduce (--dense_sync=allreduce,
  // worker/train/dense_allreduce.h); the embedding rows stay as above.
  DenseAllreduceConfig dense_allreduce;
  // (embedding_mlp) With a group of K > 1: this worker is partition
  // group->rank() of a model replica split by hidden units
  // (--model_partitions); the partitions share the replica's minibatches,
  // partition 0 reads and writes the embedding rows.
  Collective* partitions = nullptr;
};

// The row cache and filter settings of a config.
SparseRowIoOptions RowIoOptions(const SparseTrainerConfig& config);

// How the trainer reads and writes `table` (width `width`): SparseRowIo for
// Downpour, AveragingRows for averaging and EASGD (its errors).
absl::StatusOr<std::unique_ptr<RowIo>> MakeRowIo(PsClient& client, const std::string& table,
                                                 uint32_t width, const SparseTrainerConfig& config);

struct SparseTrainStats {
  int64_t steps = 0;
  int64_t examples = 0;
  int64_t keys = 0;         // keys used (and pushed), summed over steps
  int64_t keys_pulled = 0;  // of them, pulled (the others came from the cache)
  int64_t keys_pushed = 0;  // keys pushed (fewer than used with the filter)
  int64_t bad_lines = 0;
  double seconds = 0;
  double examples_per_second = 0;
  double keys_per_second = 0;
  double mean_loss_last_epoch = 0;  // log-loss of the examples as trained on
  // (embedding_mlp) Bytes of the MLP's dense tables moved by this worker:
  // pulled and pushed (servers), or allreduced (the payload of each round)
  // and written to the servers' copies (--dense_sync=allreduce).
  int64_t dense_bytes = 0;
  int64_t allreduce_rounds = 0;  // --dense_sync=allreduce: rounds, idle ones included
};

// Trains on `train_path` (LibSVM, plain or gzip). Errors: the reader's
// (naming file, line and column), the client's (naming server and table).
// `progress` gets a line every progress_interval.
absl::StatusOr<SparseTrainStats> TrainSparseLr(
    PsClient& client, const std::string& train_path, const SparseTrainerConfig& config,
    const std::function<void(const std::string&)>& progress);

struct SparseEvaluation {
  int64_t examples = 0;
  double auc = 0;
  double accuracy = 0;  // predicted probability > 0.5 against the label
  double logloss = 0;
};

// What every sparse model's training shares. A step trains on one
// minibatch (pulling and pushing through `io`) and returns its summed
// log-loss and the distinct keys it used.
struct StepOutcome {
  double loss_sum = 0;
  int64_t keys = 0;
};
using SparseStep = std::function<absl::StatusOr<StepOutcome>(
    const std::vector<SparseExample>& batch, uint64_t step)>;
// The epochs over this worker's share of train_path, a step per minibatch,
// with progress lines and statistics; at the end, flushes what `io` holds.
absl::StatusOr<SparseTrainStats> RunSparseTraining(
    const std::string& train_path, const SparseTrainerConfig& config, RowIo& io,
    const SparseStep& step, const std::function<void(const std::string&)>& progress);

// A model's predicted probabilities for a batch.
using SparsePredict =
    std::function<absl::Status(const std::vector<SparseExample>& batch, std::vector<double>* p)>;
// AUC, accuracy and log-loss of `predict` on every example of test_path.
absl::StatusOr<SparseEvaluation> RunSparseEvaluation(const std::string& test_path, int batch_size,
                                                     const SparsePredict& predict);

// The current model's AUC, accuracy and log-loss on every example of
// `test_path` (pulled in batches of batch_size examples).
absl::StatusOr<SparseEvaluation> EvaluateSparseLr(PsClient& client, const std::string& test_path,
                                                  const std::string& table, int batch_size);

}  // namespace ps

#endif  // PS_WORKER_TRAIN_SPARSE_TRAINER_H_
