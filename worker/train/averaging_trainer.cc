#include "worker/train/averaging_trainer.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/optimizer/optimizer.h"
#include "worker/train/model_ops.h"

namespace ps {

absl::StatusOr<Algorithm> ParseAlgorithm(const std::string& name) {
  for (Algorithm a : {Algorithm::kDownpour, Algorithm::kAverage, Algorithm::kEasgd}) {
    if (name == AlgorithmName(a)) return a;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--algorithm=", name, ": expected downpour, average or easgd"));
}

const char* AlgorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kDownpour:
      return "downpour";
    case Algorithm::kAverage:
      return "average";
    case Algorithm::kEasgd:
      return "easgd";
  }
  return "?";
}

proto::TableDef AveragingTableOptimizer() {
  proto::TableDef def;
  def.set_optimizer(proto::OPT_SGD);
  def.set_learning_rate(1.0f);
  return def;
}

void EndRoundValues(const AveragingConfig& averaging, int num_workers,
                    absl::Span<const float> reference, absl::Span<float> local,
                    absl::Span<float> out) {
  if (averaging.algorithm == Algorithm::kAverage) {
    const float scale = 1.0f / static_cast<float>(num_workers);
    for (size_t i = 0; i < local.size(); ++i) out[i] = (reference[i] - local[i]) * scale;
    return;
  }
  const float alpha = static_cast<float>(averaging.easgd_alpha);
  for (size_t i = 0; i < local.size(); ++i) {
    const float e = alpha * (local[i] - reference[i]);
    local[i] -= e;
    out[i] = -e;  // the center moves by e
  }
}

absl::Status ValidateAveragingConfig(const AveragingConfig& a, const TrainerConfig& t) {
  const std::string name = AlgorithmName(a.algorithm);
  if (a.algorithm == Algorithm::kDownpour) {
    return absl::InvalidArgumentError("averaging config: algorithm must be average or easgd");
  }
  if (a.every < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--average_every=", a.every, ": must be >= 1 (local steps per round)"));
  }
  if (a.algorithm == Algorithm::kEasgd && !(a.easgd_alpha > 0 && a.easgd_alpha <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--easgd_alpha=", a.easgd_alpha, ": must be in (0, 1]"));
  }
  if (t.n_fetch != 1 || t.n_push != 1 || t.overlap) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--algorithm=", name, " talks to the servers once per --average_every steps; --n_fetch (",
        t.n_fetch, "), --n_push (", t.n_push, ") and --overlap (", t.overlap ? "true" : "false",
        ") are Downpour's and must stay 1, 1 and false"));
  }
  if (absl::Status s = ValidateTrainerConfig(t); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<Optimizer>> local = MakeOptimizer(a.local_optimizer);
  if (!local.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--algorithm=", name, ": the local optimizer: ", local.status().message()));
  }
  return absl::OkStatus();
}

namespace {

// One worker's run: the local copy and its optimizer state, the center as
// last read, and the round's bookkeeping.
class AveragingRun {
 public:
  AveragingRun(ParamClient& client, const Model& model, const Dataset& shard,
               const TrainerConfig& config, const AveragingConfig& averaging,
               std::unique_ptr<Optimizer> local_optimizer)
      : client_(client),
        model_(model),
        shard_(shard),
        config_(config),
        averaging_(averaging),
        optimizer_(std::move(local_optimizer)),
        bsp_(config.consistency == Consistency::kBsp ||
             (config.consistency == Consistency::kBounded && config.staleness == 0)) {
    const size_t n = static_cast<size_t>(model.num_params());
    local_.assign(n, 0.0f);
    center_.assign(n, 0.0f);
    step_.assign(n, 0.0f);
    grad_.assign(n, 0.0f);
    state_.assign(n * optimizer_->state_per_value(), 0.0f);
    optimizer_->InitState(state_.data(), state_.size());
    pull_ops_ = ModelPullOps(model, config.table_prefix, absl::MakeSpan(center_));
    push_ops_ = ModelPushOps(model, config.table_prefix, absl::MakeConstSpan(step_));
  }

  absl::StatusOr<TrainStats> Run(const std::function<void(const std::string&)>& progress);

 private:
  bool ReadsAtRoundStart() const { return averaging_.algorithm == Algorithm::kAverage || bsp_; }
  // The center at the round's clock into center_.
  absl::Status ReadCenter() {
    PullInfo info;
    if (absl::Status s = client_.Pull(pull_ops_, round_, &info); !s.ok()) return s;
    ++totals_.pulls;
    wait_ += info.waited;
    return absl::OkStatus();
  }
  // The start of a round: what the algorithm reads there.
  absl::Status StartRound();
  // One local step on the minibatch `rows`; returns its loss.
  float LocalStep(absl::Span<const int64_t> rows);
  // The end of a round (steps_in_round_ > 0): the push, and what it reads.
  absl::Status EndRound();
  void ReportProgress(int epoch, float loss, int batch, bool epoch_end,
                      const std::function<void(const std::string&)>& progress);

  ParamClient& client_;
  const Model& model_;
  const Dataset& shard_;
  const TrainerConfig& config_;
  const AveragingConfig& averaging_;
  const std::unique_ptr<Optimizer> optimizer_;
  const bool bsp_;
  AlignedVector<float> local_, grad_;  // the copy and its gradient (aligned: trainer.h)
  std::vector<float> center_, step_, state_;
  std::vector<PullRange> pull_ops_;
  std::vector<PushRange> push_ops_;
  uint64_t round_ = 0;  // the current round: its clock
  int steps_in_round_ = 0;
  TrainStats totals_;
  absl::Duration wait_;
  absl::Time start_;
  std::optional<ProgressWindow> window_;
  AlignedVector<float> xb_;
  std::vector<int32_t> yb_;
};

absl::Status AveragingRun::StartRound() {
  if (!ReadsAtRoundStart()) return absl::OkStatus();
  if (absl::Status s = ReadCenter(); !s.ok()) return s;
  // Averaging starts every round from the center; EASGD only its first.
  if (averaging_.algorithm == Algorithm::kAverage || totals_.pulls == 1)
    local_.assign(center_.begin(), center_.end());
  return absl::OkStatus();
}

float AveragingRun::LocalStep(absl::Span<const int64_t> rows) {
  const float loss = BatchLossAndGradient(model_, shard_, rows, local_, absl::MakeSpan(grad_),
                                          config_, &xb_, &yb_);
  // Tables of width 1, as the servers would apply it; the steps before this
  // one (totals_.steps counts it already) are the schedule's clock.
  optimizer_->Apply(local_.data(), state_.empty() ? nullptr : state_.data(), grad_.data(),
                    local_.size(), 1, static_cast<uint64_t>(totals_.steps - 1));
  ++steps_in_round_;
  totals_.examples += static_cast<int64_t>(rows.size());
  return loss;
}

absl::Status AveragingRun::EndRound() {
  // Async EASGD reads the center here (its first round starts from the
  // center read before training, in Run); the others read it at the
  // round's start. Averaging's mean of the copies under BSP: see the header.
  if (!ReadsAtRoundStart()) {
    if (absl::Status s = ReadCenter(); !s.ok()) return s;
  }
  EndRoundValues(averaging_, config_.num_workers, center_, absl::MakeSpan(local_),
                 absl::MakeSpan(step_));
  if (absl::Status s = client_.Push(push_ops_, round_, nullptr); !s.ok()) return s;
  ++totals_.pushes;
  ++round_;
  steps_in_round_ = 0;
  return absl::OkStatus();
}

void AveragingRun::ReportProgress(int epoch, float loss, int batch, bool epoch_end,
                                  const std::function<void(const std::string&)>& progress) {
  if (!progress && !config_.on_progress) return;
  std::optional<ProgressPoint> point =
      window_->Step(loss, batch, epoch, totals_.steps, totals_.examples, epoch_end);
  if (!point) return;
  if (progress) {
    progress(absl::StrFormat(
        "worker %d/%d epoch %d step %d loss %.4f examples/s %.0f %s round %d (every %d steps) "
        "waited %.2fs of %.2fs%s",
        config_.worker_index, config_.num_workers, epoch, totals_.steps, point->loss,
        point->examples_per_second, AlgorithmName(averaging_.algorithm), round_, averaging_.every,
        absl::ToDoubleSeconds(wait_), point->seconds, epoch_end ? " (epoch end)" : ""));
  }
  if (config_.on_progress) config_.on_progress(*point);
}

absl::StatusOr<TrainStats> AveragingRun::Run(
    const std::function<void(const std::string&)>& progress) {
  xb_.resize(static_cast<size_t>(config_.batch_size) * shard_.dim);
  yb_.resize(config_.batch_size);
  round_ = config_.start_clock;
  start_ = absl::Now();
  window_.emplace(start_, config_.progress_interval);
  if (!ReadsAtRoundStart()) {
    // Async EASGD: the local copy starts from the center.
    if (absl::Status s = ReadCenter(); !s.ok()) return s;
    local_.assign(center_.begin(), center_.end());
  }
  // The rounds of a restored checkpoint are skipped, shuffles kept.
  absl::StatusOr<double> last_epoch_loss = ForEachMinibatch(
      shard_, config_, static_cast<int64_t>(config_.start_clock) * averaging_.every, &totals_.steps,
      [&](const Minibatch& batch) -> absl::StatusOr<float> {
        if (steps_in_round_ == 0) {
          if (absl::Status s = StartRound(); !s.ok()) return s;
        }
        const float loss = LocalStep(batch.rows);
        if (steps_in_round_ == averaging_.every) {
          if (absl::Status s = EndRound(); !s.ok()) return s;
        }
        ReportProgress(batch.epoch, loss, static_cast<int>(batch.rows.size()), batch.epoch_end,
                       progress);
        return loss;
      });
  if (!last_epoch_loss.ok()) return last_epoch_loss.status();
  totals_.mean_loss_last_epoch = *last_epoch_loss;
  if (steps_in_round_ > 0) {
    // The last, partial round.
    if (absl::Status s = EndRound(); !s.ok()) return s;
  }
  TrainStats stats = totals_;
  stats.seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  stats.examples_per_second = stats.seconds > 0 ? stats.examples / stats.seconds : 0;
  stats.values_pushed = stats.pushes * model_.num_params();
  stats.values_pulled = stats.pulls * model_.num_params();
  stats.wait_seconds = absl::ToDoubleSeconds(wait_);
  return stats;
}

}  // namespace

absl::StatusOr<TrainStats> TrainAveraging(ParamClient& client, const Model& model,
                                          const Dataset& shard, const TrainerConfig& trainer,
                                          const AveragingConfig& averaging,
                                          const std::function<void(const std::string&)>& progress) {
  if (absl::Status s = ValidateAveragingConfig(averaging, trainer); !s.ok()) return s;
  if (absl::Status s = CheckShard(model, shard, trainer.worker_index); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<Optimizer>> local = MakeOptimizer(averaging.local_optimizer);
  if (!local.ok()) return local.status();
  AveragingRun run(client, model, shard, trainer, averaging, *std::move(local));
  return run.Run(progress);
}

}  // namespace ps
