#include "worker/train/sparse_trainer.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "worker/train/auc.h"
#include "worker/train/averaging_rows.h"
#include "worker/train/libsvm_reader.h"
#include "worker/train/sparse_batch.h"
#include "worker/train/sparse_row_io.h"

namespace ps {

namespace {

// Predicted probabilities of the batch's examples from the keys' weights.
void Predict(const std::vector<SparseExample>& batch, const BatchKeys& bk,
             const std::vector<float>& w, std::vector<double>* p) {
  p->resize(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    double z = w[bk.extra];
    for (size_t j = 0; j < batch[i].values.size(); ++j) {
      z += static_cast<double>(w[bk.index[i][j]]) * batch[i].values[j];
    }
    (*p)[i] = Sigmoid(z);
  }
}

}  // namespace

SparseRowIoOptions RowIoOptions(const SparseTrainerConfig& config) {
  SparseRowIoOptions options;
  options.cache_staleness = config.row_cache_staleness;
  options.cache_rows = config.row_cache_rows;
  options.push_threshold = config.push_threshold;
  options.filter_rows = config.filter_rows;
  return options;
}

absl::StatusOr<std::unique_ptr<RowIo>> MakeRowIo(PsClient& client, const std::string& table,
                                                 uint32_t width,
                                                 const SparseTrainerConfig& config) {
  if (config.averaging.algorithm == Algorithm::kDownpour) {
    return std::make_unique<SparseRowIo>(client, table, width, RowIoOptions(config));
  }
  absl::StatusOr<std::unique_ptr<AveragingRows>> rows =
      AveragingRows::Create(client, table, width, config.averaging, config.num_workers);
  if (!rows.ok()) return rows.status();
  return std::unique_ptr<RowIo>(*std::move(rows));
}

proto::TableDef SparseLrTable(const std::string& name, const proto::TableDef& optimizer,
                              uint32_t num_buckets) {
  proto::TableDef def = optimizer;
  def.set_name(name);
  def.set_kind(proto::TABLE_SPARSE);
  def.set_num_buckets(num_buckets);
  def.set_width(1);
  def.set_initializer(proto::INIT_ZEROS);
  return def;
}

absl::StatusOr<SparseTrainStats> RunSparseTraining(
    const std::string& train_path, const SparseTrainerConfig& config, RowIo& io,
    const SparseStep& step, const std::function<void(const std::string&)>& progress) {
  LibsvmOptions options;
  options.skip_bad_lines = config.skip_bad_lines;
  auto reader = LibsvmReader::Open(train_path, options);
  if (!reader.ok()) return reader.status();
  SparseTrainStats stats;
  const absl::Time start = absl::Now();
  absl::Time next_progress = start + config.progress_interval;
  std::vector<SparseExample> batch;
  for (int epoch = 0; epoch < config.epochs; ++epoch) {
    if (epoch > 0) {
      if (absl::Status s = (*reader)->Rewind(); !s.ok()) return s;
    }
    int64_t file_index = 0;  // of the examples read, over all workers
    double epoch_loss = 0;
    int64_t epoch_examples = 0;
    while (true) {
      if (absl::Status s =
              NextShardBatch(**reader, config.worker_index, config.num_workers, config.batch_size,
                             config.max_train_examples, &file_index, &batch);
          !s.ok()) {
        return s;
      }
      if (batch.empty()) break;
      absl::StatusOr<StepOutcome> outcome = step(batch, static_cast<uint64_t>(stats.steps));
      if (!outcome.ok()) return outcome.status();
      epoch_loss += outcome->loss_sum;
      ++stats.steps;
      stats.examples += static_cast<int64_t>(batch.size());
      stats.keys += outcome->keys;
      epoch_examples += static_cast<int64_t>(batch.size());
      const absl::Time now = absl::Now();
      if (now >= next_progress) {
        const double secs = absl::ToDoubleSeconds(now - start);
        progress(absl::StrFormat(
            "worker %d/%d: epoch %d step %d: %d examples, %.0f examples/s, %.0f keys/s "
            "(%.0f%% pulled, %.0f%% pushed), log-loss %.4f",
            config.worker_index, config.num_workers, epoch + 1, stats.steps, stats.examples,
            stats.examples / secs, stats.keys / secs,
            100.0 * io.keys_pulled() / std::max<int64_t>(1, stats.keys),
            100.0 * io.keys_pushed() / std::max<int64_t>(1, stats.keys),
            epoch_loss / std::max<int64_t>(1, epoch_examples)));
        next_progress = now + config.progress_interval;
        if (config.on_progress) {
          ProgressPoint point;
          point.seconds = secs;
          point.epoch = epoch + 1;
          point.step = stats.steps;
          point.examples = stats.examples;
          point.loss = epoch_loss / std::max<int64_t>(1, epoch_examples);
          point.examples_per_second = stats.examples / secs;
          config.on_progress(point);
        }
      }
    }
    stats.mean_loss_last_epoch = epoch_loss / std::max<int64_t>(1, epoch_examples);
  }
  // What the filter still holds is pushed: no gradient is lost.
  if (absl::Status s = io.Flush(static_cast<uint64_t>(stats.steps)); !s.ok()) return s;
  stats.keys_pulled = io.keys_pulled();
  stats.keys_pushed = io.keys_pushed();
  stats.bad_lines = (*reader)->bad_lines();
  stats.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (stats.seconds > 0) {
    stats.examples_per_second = stats.examples / stats.seconds;
    stats.keys_per_second = stats.keys / stats.seconds;
  }
  return stats;
}

absl::StatusOr<SparseEvaluation> RunSparseEvaluation(const std::string& test_path, int batch_size,
                                                     const SparsePredict& predict) {
  auto reader = LibsvmReader::Open(test_path);
  if (!reader.ok()) return reader.status();
  SparseEvaluation eval;
  AucAccumulator auc;
  int64_t correct = 0;
  double loss = 0;
  std::vector<SparseExample> batch;
  std::vector<double> p;
  while (true) {
    if (absl::Status s = (*reader)->NextBatch(static_cast<size_t>(batch_size), &batch); !s.ok()) {
      return s;
    }
    if (batch.empty()) break;
    if (absl::Status s = predict(batch, &p); !s.ok()) return s;
    for (size_t i = 0; i < batch.size(); ++i) {
      auc.Add(p[i], batch[i].label);
      correct += (p[i] > 0.5) == (batch[i].label > 0.5f);
      loss += LogLoss(p[i], batch[i].label);
    }
    eval.examples += static_cast<int64_t>(batch.size());
  }
  if (eval.examples == 0) {
    return absl::InvalidArgumentError(absl::StrCat(test_path, ": no test examples"));
  }
  eval.auc = auc.Auc();
  eval.accuracy = static_cast<double>(correct) / eval.examples;
  eval.logloss = loss / eval.examples;
  return eval;
}

absl::StatusOr<SparseTrainStats> TrainSparseLr(
    PsClient& client, const std::string& train_path, const SparseTrainerConfig& config,
    const std::function<void(const std::string&)>& progress) {
  absl::StatusOr<std::unique_ptr<RowIo>> made = MakeRowIo(client, config.table, 1, config);
  if (!made.ok()) return made.status();
  RowIo& io = **made;
  BatchKeys bk;
  std::vector<float> w, grad;
  std::vector<double> p;
  auto step = [&](const std::vector<SparseExample>& batch,
                  uint64_t clock) -> absl::StatusOr<StepOutcome> {
    bk.Build(batch, kBiasKey);
    w.assign(bk.keys.size(), 0.0f);
    if (absl::Status s = io.Pull(bk.keys, clock, absl::MakeSpan(w)); !s.ok()) return s;
    Predict(batch, bk, w, &p);
    StepOutcome outcome;
    outcome.keys = static_cast<int64_t>(bk.keys.size());
    grad.assign(bk.keys.size(), 0.0f);
    for (size_t i = 0; i < batch.size(); ++i) {
      outcome.loss_sum += LogLoss(p[i], batch[i].label);
      const float g = static_cast<float>(p[i] - batch[i].label);
      grad[bk.extra] += g;
      for (size_t j = 0; j < batch[i].values.size(); ++j) {
        grad[bk.index[i][j]] += g * batch[i].values[j];
      }
    }
    if (absl::Status s = io.Push(bk.keys, grad, clock); !s.ok()) return s;
    return outcome;
  };
  return RunSparseTraining(train_path, config, io, step, progress);
}

absl::StatusOr<SparseEvaluation> EvaluateSparseLr(PsClient& client, const std::string& test_path,
                                                  const std::string& table, int batch_size) {
  BatchKeys bk;
  std::vector<float> w;
  return RunSparseEvaluation(
      test_path, batch_size,
      [&](const std::vector<SparseExample>& batch, std::vector<double>* p) -> absl::Status {
        bk.Build(batch, kBiasKey);
        w.assign(bk.keys.size(), 0.0f);
        if (absl::Status s = client.PullKeys(table, bk.keys, 1, absl::MakeSpan(w)); !s.ok()) {
          return s;
        }
        Predict(batch, bk, w, p);
        return absl::OkStatus();
      });
}

}  // namespace ps
