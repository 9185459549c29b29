#include "worker/train/partitioned_mlp.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/aligned_vector.h"
#include "worker/train/progress.h"

namespace ps {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using MatrixMap = Eigen::Map<RowMatrix>;
using RowVectorMap = Eigen::Map<Eigen::RowVectorXf>;

absl::Status AtStep(int64_t step, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat("step ", step, ": ", s.message()));
}

// One partition's run: its parameters and gradients (flat, one weight
// block and one bias block per layer, in layer order), the pull and push
// ops over them, and the step.
class PartitionedRun {
 public:
  PartitionedRun(ParamClient& client, MlpPartition part, const TrainerConfig& config,
                 Collective* group)
      : client_(client), part_(std::move(part)), config_(config), group_(group) {
    BuildOps();
    in_.resize(L());
    h_.resize(L());
  }

  absl::StatusOr<PartitionedTrainStats> Run(
      const Dataset& shard, const std::function<void(const std::string&)>& progress);
  absl::StatusOr<double> Accuracy(const Dataset& test);

 private:
  int L() const { return part_.num_layers(); }
  int Width(int j) const { return part_.widths[j]; }
  // Layer l's weights as this partition holds them: widths[l] x Count(l+1)
  // (into a hidden layer: its units' columns) or Count(L-1) x classes (the
  // output: its units' rows).
  int WeightRows(int l) const { return l + 1 < L() ? Width(l) : part_.Count(l); }
  int WeightCols(int l) const { return l + 1 < L() ? part_.Count(l + 1) : Width(L()); }
  MatrixMap W(AlignedVector<float>& v, int l) {
    return MatrixMap(v.data() + w_off_[l], WeightRows(l), WeightCols(l));
  }
  RowVectorMap B(AlignedVector<float>& v, int l) {
    return RowVectorMap(v.data() + b_off_[l], part_.Count(l + 1));
  }

  void BuildOps();
  absl::Status CheckDim(const Dataset& data) const;
  // The examples `rows` of `data` into xb_ and yb_ (sized for them).
  void GatherBatch(const Dataset& data, absl::Span<const int64_t> rows);
  // The logits of the batch x (every partition gets them all).
  absl::StatusOr<RowMatrix> Forward(const ConstMatrixMap& x);
  // Forward and backward on the batch; gradients into grads_. Returns the
  // batch's mean loss.
  absl::StatusOr<float> Step(const Dataset& shard, absl::Span<const int64_t> rows);
  // Every partition's units of hidden layer j (own: batch x Count(j))
  // into `full` (batch x Width(j)).
  absl::Status Gather(int j, const RowMatrix& own, RowMatrix* full);

  ParamClient& client_;
  const MlpPartition part_;
  const TrainerConfig config_;
  Collective* const group_;
  std::vector<int64_t> w_off_, b_off_;
  AlignedVector<float> params_, grads_, xb_;
  std::vector<int32_t> yb_;
  std::vector<PullRange> pull_ops_;
  std::vector<PushRange> push_ops_;
  std::vector<RowMatrix> in_;  // in_[l]: the full input of weight layer l (l >= 1)
  std::vector<RowMatrix> h_;   // h_[j]: this partition's activations of hidden layer j
  std::vector<float> piece_, gathered_;
  PartitionedTrainStats stats_;
};

void PartitionedRun::BuildOps() {
  int64_t offset = 0;
  for (int l = 0; l < L(); ++l) {
    w_off_.push_back(offset);
    offset += static_cast<int64_t>(WeightRows(l)) * WeightCols(l);
    b_off_.push_back(offset);
    offset += part_.Count(l + 1);
  }
  params_.assign(offset, 0.0f);
  grads_.assign(offset, 0.0f);
  const std::string prefix = config_.table_prefix + "/fc";
  for (int l = 0; l < L(); ++l) {
    const std::string w = absl::StrCat(prefix, l, "/w"), b = absl::StrCat(prefix, l, "/b");
    const uint64_t out = Width(l + 1);
    const size_t cols = WeightCols(l);
    // `rows` runs of `count` keys from `begin`, every `stride` keys.
    auto add = [&](const std::string& table, uint64_t begin, uint64_t count, int64_t at,
                   uint64_t rows, uint64_t stride) {
      const size_t n = count * rows;
      // Under bounded delay and BSP every partition takes part in every
      // server's rounds of every table, whether its share is there or not.
      const bool every_server = config_.consistency != Consistency::kAsync;
      pull_ops_.push_back({table, begin, begin + count, absl::MakeSpan(params_).subspan(at, n),
                           rows, stride, every_server});
      push_ops_.push_back({table, begin, begin + count, absl::MakeSpan(grads_).subspan(at, n),
                           nullptr, rows, stride, every_server});
    };
    if (l + 1 < L()) {
      // Into a hidden layer: its units' columns, a run of keys per input
      // row (one strided op).
      add(w, part_.First(l + 1), cols, w_off_[l], Width(l), out);
    } else {
      // The output: the rows of its units of the last hidden layer.
      add(w, static_cast<uint64_t>(part_.First(l)) * out,
          static_cast<uint64_t>(part_.Count(l)) * out, w_off_[l], 1, 0);
    }
    add(b, part_.First(l + 1), part_.Count(l + 1), b_off_[l], 1, 0);
  }
}

absl::Status PartitionedRun::Gather(int j, const RowMatrix& own, RowMatrix* full) {
  const int batch = static_cast<int>(own.rows());
  const size_t max = static_cast<size_t>(batch) * part_.MaxCount(j);
  piece_.assign(max, 0.0f);
  std::copy(own.data(), own.data() + own.size(), piece_.begin());
  gathered_.resize(max * part_.partitions);
  if (absl::Status s = group_->Allgather(piece_, absl::MakeSpan(gathered_)); !s.ok()) return s;
  stats_.activation_values += static_cast<int64_t>(max);
  full->resize(batch, Width(j));
  for (int q = 0; q < part_.partitions; ++q) {
    const int first = part_.First(j, q), count = part_.First(j, q + 1) - first;
    full->middleCols(first, count) = ConstMatrixMap(gathered_.data() + q * max, batch, count);
  }
  return absl::OkStatus();
}

absl::StatusOr<RowMatrix> PartitionedRun::Forward(const ConstMatrixMap& x) {
  // The hidden layers (the full input of each but the first gathered from
  // the partitions' units).
  for (int l = 0; l + 1 < L(); ++l) {
    RowMatrix z = l == 0 ? RowMatrix(x * W(params_, l)) : RowMatrix(in_[l] * W(params_, l));
    z.rowwise() += B(params_, l);
    h_[l + 1] = z.cwiseMax(0.0f);
    if (l + 2 < L()) {
      if (absl::Status s = Gather(l + 1, h_[l + 1], &in_[l + 1]); !s.ok()) return s;
    }
  }
  // The logits: each partition's units' share and its classes' biases,
  // summed over the partitions.
  const int last = L() - 1;
  RowMatrix logits = h_[last] * W(params_, last);
  logits.middleCols(part_.First(L()), part_.Count(L())).rowwise() += B(params_, last);
  if (absl::Status s = group_->AllreduceSum(absl::MakeSpan(logits.data(), logits.size()));
      !s.ok()) {
    return s;
  }
  stats_.activation_values += logits.size();
  return logits;
}

void PartitionedRun::GatherBatch(const Dataset& data, absl::Span<const int64_t> rows) {
  const int dim = data.dim;
  for (size_t r = 0; r < rows.size(); ++r) {
    std::copy_n(data.row(rows[r]), dim, xb_.data() + r * dim);
    yb_[r] = data.labels[rows[r]];
  }
}

absl::StatusOr<float> PartitionedRun::Step(const Dataset& shard, absl::Span<const int64_t> rows) {
  const int batch = static_cast<int>(rows.size());
  GatherBatch(shard, rows);
  const ConstMatrixMap x(xb_.data(), batch, shard.dim);
  absl::StatusOr<RowMatrix> forward = Forward(x);
  if (!forward.ok()) return forward.status();
  RowMatrix& logits = *forward;
  const int last = L() - 1;

  // Softmax cross-entropy, as Model::LossAndGradient computes it.
  const Eigen::VectorXf row_max = logits.rowwise().maxCoeff();
  logits.colwise() -= row_max;
  RowMatrix delta = logits.array().exp().matrix();
  const Eigen::VectorXf row_sum = delta.rowwise().sum();
  double loss = 0;
  for (int i = 0; i < batch; ++i) loss += std::log(row_sum[i]) - logits(i, yb_[i]);
  delta.array().colwise() /= row_sum.array();
  for (int i = 0; i < batch; ++i) delta(i, yb_[i]) -= 1.0f;
  delta *= 1.0f / batch;

  // Backward: the output layer, then each hidden layer.
  W(grads_, last).noalias() = h_[last].transpose() * delta;
  B(grads_, last) = delta.middleCols(part_.First(L()), part_.Count(L())).colwise().sum();
  RowMatrix d_own = delta * W(params_, last).transpose();
  d_own.array() *= (h_[last].array() > 0.0f).cast<float>();
  for (int l = last - 1; l >= 0; --l) {
    if (l == 0) {
      W(grads_, 0).noalias() = x.transpose() * d_own;
    } else {
      W(grads_, l).noalias() = in_[l].transpose() * d_own;
    }
    B(grads_, l) = d_own.colwise().sum();
    if (l == 0) break;
    // The gradient of the full input: every partition's share, summed.
    RowMatrix d_in = d_own * W(params_, l).transpose();
    if (absl::Status s = group_->AllreduceSum(absl::MakeSpan(d_in.data(), d_in.size())); !s.ok()) {
      return s;
    }
    stats_.activation_values += d_in.size();
    RowMatrix next = d_in.middleCols(part_.First(l), part_.Count(l));
    next.array() *= (h_[l].array() > 0.0f).cast<float>();
    d_own = std::move(next);
  }
  return static_cast<float>(loss / batch);
}

absl::Status PartitionedRun::CheckDim(const Dataset& data) const {
  if (data.dim == Width(0)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the examples have ", data.dim, " features, the model's input ", Width(0)));
}

absl::StatusOr<double> PartitionedRun::Accuracy(const Dataset& test) {
  if (absl::Status s = CheckDim(test); !s.ok()) return s;
  if (absl::Status s = client_.Pull(pull_ops_, 0, nullptr); !s.ok()) return s;
  constexpr int64_t kBatch = 1024;
  xb_.resize(static_cast<size_t>(kBatch) * test.dim);
  yb_.resize(kBatch);
  std::vector<int64_t> rows;
  int64_t correct = 0;
  for (int64_t first = 0; first < test.num_examples; first += kBatch) {
    rows.clear();
    for (int64_t i = first; i < std::min(test.num_examples, first + kBatch); ++i) rows.push_back(i);
    GatherBatch(test, rows);
    absl::StatusOr<RowMatrix> logits =
        Forward(ConstMatrixMap(xb_.data(), static_cast<int64_t>(rows.size()), test.dim));
    if (!logits.ok()) return logits.status();
    for (size_t r = 0; r < rows.size(); ++r) {
      Eigen::Index best;
      logits->row(static_cast<Eigen::Index>(r)).maxCoeff(&best);
      correct += best == yb_[r];
    }
  }
  return test.num_examples > 0 ? static_cast<double>(correct) / test.num_examples : 0.0;
}

absl::StatusOr<PartitionedTrainStats> PartitionedRun::Run(
    const Dataset& shard, const std::function<void(const std::string&)>& progress) {
  if (absl::Status s = CheckDim(shard); !s.ok()) return s;
  xb_.resize(static_cast<size_t>(config_.batch_size) * shard.dim);
  yb_.resize(config_.batch_size);
  stats_.params_held = part_.ParamsHeld();
  const absl::Time start = absl::Now();
  ProgressWindow window(start, config_.progress_interval);
  uint64_t clock = config_.start_clock;
  absl::StatusOr<double> last_epoch_loss = ForEachMinibatch(
      shard, config_, static_cast<int64_t>(config_.start_clock), &stats_.steps,
      [&](const Minibatch& batch) -> absl::StatusOr<float> {
        if (absl::Status s = client_.Pull(pull_ops_, clock, nullptr); !s.ok()) {
          return AtStep(stats_.steps, s);
        }
        stats_.values_pulled += static_cast<int64_t>(params_.size());
        absl::StatusOr<float> loss = Step(shard, batch.rows);
        if (!loss.ok()) return AtStep(stats_.steps, loss.status());
        if (absl::Status s = client_.Push(push_ops_, clock, nullptr); !s.ok()) {
          return AtStep(stats_.steps, s);
        }
        ++clock;
        stats_.values_pushed += static_cast<int64_t>(grads_.size());
        stats_.examples += static_cast<int64_t>(batch.rows.size());
        std::optional<ProgressPoint> point =
            window.Step(*loss, static_cast<int>(batch.rows.size()), batch.epoch, stats_.steps,
                        stats_.examples, batch.epoch_end);
        if (point.has_value()) {
          if (config_.on_progress) config_.on_progress(*point);
          if (progress) {
            progress(absl::StrFormat(
                "worker %d/%d partition %d/%d: epoch %d step %d: %d examples, %.0f examples/s, "
                "loss %.4f",
                config_.worker_index, config_.num_workers, part_.partition, part_.partitions,
                point->epoch, point->step, point->examples, point->examples_per_second,
                point->loss));
          }
        }
        return *loss;
      });
  if (!last_epoch_loss.ok()) return last_epoch_loss.status();
  stats_.mean_loss_last_epoch = *last_epoch_loss;
  stats_.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  stats_.examples_per_second = stats_.seconds > 0 ? stats_.examples / stats_.seconds : 0;
  return stats_;
}

}  // namespace

absl::StatusOr<MlpPartition> MlpPartition::Make(std::vector<int> widths, int partitions,
                                                int partition) {
  if (widths.size() < 3) {
    return absl::InvalidArgumentError(
        "model partitions split hidden layers: the model needs at least one (--model=mlp)");
  }
  if (partitions < 1 || partition < 0 || partition >= partitions) {
    return absl::InvalidArgumentError(
        absl::StrCat("partition ", partition, " of ", partitions, ": out of range"));
  }
  for (size_t j = 1; j < widths.size(); ++j) {
    if (widths[j] < partitions) {
      return absl::InvalidArgumentError(absl::StrCat(
          j + 1 < widths.size() ? absl::StrCat("hidden layer ", j) : std::string("the output"),
          " has ", widths[j], j + 1 < widths.size() ? " units" : " classes", ": too few for ",
          partitions, " partitions (each owns at least one)"));
    }
  }
  MlpPartition p;
  p.widths = std::move(widths);
  p.partitions = partitions;
  p.partition = partition;
  return p;
}

int MlpPartition::First(int j, int p) const {
  return static_cast<int>(static_cast<int64_t>(p) * widths[j] / partitions);
}

int MlpPartition::MaxCount(int j) const {
  int max = 0;
  for (int p = 0; p < partitions; ++p) max = std::max(max, First(j, p + 1) - First(j, p));
  return max;
}

int64_t MlpPartition::ParamsHeld() const {
  int64_t n = 0;
  const int layers = num_layers();
  for (int l = 0; l < layers; ++l) {
    const int64_t rows = l + 1 < layers ? widths[l] : Count(l);
    const int64_t cols = l + 1 < layers ? Count(l + 1) : widths[layers];
    n += rows * cols + Count(l + 1);
  }
  return n;
}

int64_t MlpPartition::ParamsTotal() const {
  int64_t n = 0;
  for (int l = 0; l + 1 < static_cast<int>(widths.size()); ++l) {
    n += static_cast<int64_t>(widths[l]) * widths[l + 1] + widths[l + 1];
  }
  return n;
}

absl::StatusOr<PartitionedTrainStats> TrainPartitionedMlp(
    ParamClient& client, const std::vector<int>& widths, const Dataset& shard,
    const TrainerConfig& config, Collective* group,
    const std::function<void(const std::string&)>& progress) {
  absl::StatusOr<MlpPartition> part = MlpPartition::Make(widths, group->size(), group->rank());
  if (!part.ok()) return part.status();
  PartitionedRun run(client, *std::move(part), config, group);
  return run.Run(shard, progress);
}

absl::StatusOr<double> PartitionedMlpAccuracy(ParamClient& client, const std::vector<int>& widths,
                                              const Dataset& test, const std::string& table_prefix,
                                              Collective* group) {
  absl::StatusOr<MlpPartition> part = MlpPartition::Make(widths, group->size(), group->rank());
  if (!part.ok()) return part.status();
  TrainerConfig config;
  config.table_prefix = table_prefix;
  PartitionedRun run(client, *std::move(part), config, group);
  return run.Accuracy(test);
}

}  // namespace ps
