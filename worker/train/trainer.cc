#include "worker/train/trainer.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/hash.h"
#include "common/optimizer/lars.h"
#include "worker/train/background_queue.h"
#include "worker/train/model_ops.h"

namespace ps {

absl::Status ValidateTrainerConfig(const TrainerConfig& c) {
  auto bad = [](const char* field, int64_t value, const char* want) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer ", field, "=", value, ": must be ", want));
  };
  if (c.num_workers < 1) return bad("num_workers", c.num_workers, ">= 1");
  if (c.worker_index < 0 || c.worker_index >= c.num_workers) {
    return bad("worker_index", c.worker_index, "in [0, num_workers)");
  }
  if (c.epochs < 1) return bad("epochs", c.epochs, ">= 1");
  if (c.batch_size < 1) return bad("batch_size", c.batch_size, ">= 1");
  if (c.n_fetch < 1) return bad("n_fetch", c.n_fetch, ">= 1");
  if (c.n_push < 1) return bad("n_push", c.n_push, ">= 1");
  if (c.max_steps < 0) return bad("max_steps", c.max_steps, ">= 0");
  if (!(c.slowdown >= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer slowdown=", c.slowdown, ": must be >= 1"));
  }
  if (c.staleness < 0) return bad("staleness", c.staleness, ">= 0");
  const bool bsp = c.consistency == Consistency::kBsp ||
                   (c.consistency == Consistency::kBounded && c.staleness == 0);
  if (bsp && c.n_fetch != c.n_push) {
    const std::string mode = c.consistency == Consistency::kBsp
                                 ? "--consistency=bsp"
                                 : "--consistency=bounded with --staleness=0 (that is, BSP)";
    return absl::InvalidArgumentError(absl::StrCat(
        mode, " needs --n_fetch == --n_push (got n_fetch ", c.n_fetch, ", n_push ", c.n_push,
        "): a BSP push of round t waits until every worker has read round t, so each worker "
        "must pull exactly once per round, at its start; ",
        c.n_fetch > c.n_push || c.n_push % c.n_fetch != 0
            ? "otherwise some round is never read and every worker waits forever"
            : "extra pulls within a round would read other workers' pushes of that round, "
              "which is not BSP",
        ". Set --n_fetch and --n_push to the same value, or use --consistency=bounded with "
        "--staleness >= 1 or --consistency=async, which allow any n_fetch and n_push"));
  }
  if (c.overlap && c.n_fetch != c.n_push) {
    return absl::InvalidArgumentError(absl::StrCat("trainer overlap needs n_fetch == n_push, got ",
                                                   c.n_fetch, " and ", c.n_push));
  }
  return absl::OkStatus();
}

std::vector<proto::TableDef> ModelTables(const Model& model, const std::string& prefix,
                                         const proto::TableDef& optimizer, uint64_t seed) {
  std::vector<proto::TableDef> tables;
  for (const ParamBlock& block : model.blocks()) {
    proto::TableDef def = optimizer;
    def.set_name(absl::StrCat(prefix, "/", block.name));
    def.set_width(1);
    def.set_num_keys(static_cast<uint64_t>(block.size));
    if (block.init_bound > 0) {
      def.set_initializer(proto::INIT_UNIFORM);
      def.set_init_low(-block.init_bound);
      def.set_init_high(block.init_bound);
    } else {
      def.set_initializer(proto::INIT_ZEROS);
      def.clear_lars_eta();  // a bias
      def.clear_lars_beta();
    }
    def.set_seed(HashCombine(seed, HashString(block.name)));
    tables.push_back(std::move(def));
  }
  return tables;
}

absl::Status CreateModelTables(ParamClient& client, const std::vector<proto::TableDef>& tables) {
  for (const proto::TableDef& def : tables) {
    if (absl::Status s = client.CreateTable(def); !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("creating table '", def.name(), "': ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status PullParams(ParamClient& client, const Model& model, const std::string& prefix,
                        absl::Span<float> params, uint64_t clock, PullInfo* info) {
  return client.Pull(ModelPullOps(model, prefix, params), clock, info);
}

absl::Status CheckShard(const Model& model, const Dataset& shard, int worker_index) {
  if (shard.num_examples == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker_index, " has no training examples in its shard"));
  }
  if (shard.dim != model.input_dim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data dim ", shard.dim, " != model input dim ", model.input_dim()));
  }
  return absl::OkStatus();
}

float BatchLossAndGradient(const Model& model, const Dataset& shard, absl::Span<const int64_t> rows,
                           absl::Span<const float> params, absl::Span<float> grad,
                           const TrainerConfig& config, AlignedVector<float>* xb,
                           std::vector<int32_t>* yb) {
  const int dim = shard.dim;
  const int batch = static_cast<int>(rows.size());
  for (int r = 0; r < batch; ++r) {
    std::copy_n(shard.row(rows[r]), dim, xb->data() + static_cast<size_t>(r) * dim);
    (*yb)[r] = shard.labels[rows[r]];
  }
  const absl::Time compute_start = absl::Now();
  const float loss = model.LossAndGradient(params, xb->data(), yb->data(), batch, grad);
  if (config.slowdown > 1.0) {
    absl::SleepFor((absl::Now() - compute_start) * (config.slowdown - 1.0));
  }
  return loss;
}

absl::StatusOr<double> ForEachMinibatch(
    const Dataset& shard, const TrainerConfig& config, int64_t skip, int64_t* steps,
    const std::function<absl::StatusOr<float>(const Minibatch& batch)>& train) {
  std::vector<int64_t> order(shard.num_examples);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(HashCombine(config.seed, config.worker_index));
  double last_epoch_loss = 0;
  bool done = false;
  for (int epoch = 1; epoch <= config.epochs && !done; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    double epoch_loss = 0;
    int64_t epoch_steps = 0;
    for (int64_t first = 0; first < shard.num_examples && !done; first += config.batch_size) {
      ++*steps;
      done = config.max_steps > 0 && *steps >= config.max_steps;
      if (skip > 0) {
        --skip;
        continue;
      }
      Minibatch batch;
      batch.epoch = epoch;
      batch.rows = absl::MakeConstSpan(order).subspan(
          first, std::min<int64_t>(config.batch_size, shard.num_examples - first));
      batch.epoch_end = first + config.batch_size >= shard.num_examples || done;
      batch.last = done || (epoch == config.epochs && batch.epoch_end);
      absl::StatusOr<float> loss = train(batch);
      if (!loss.ok()) return loss.status();
      epoch_loss += *loss;
      ++epoch_steps;
    }
    last_epoch_loss = epoch_loss / std::max<int64_t>(1, epoch_steps);
  }
  return last_epoch_loss;
}

namespace {

// One Downpour run: the local parameter copies, the gradient accumulators and
// the bookkeeping for staleness and progress. With overlap, rounds of
// (push, pull) run on `comm_` while the next round computes; the two
// parameter and gradient buffers alternate between the two.
class DownpourRun {
 public:
  DownpourRun(ParamClient& client, const Model& model, const Dataset& shard,
              const TrainerConfig& config)
      : client_(client), model_(model), shard_(shard), config_(config) {
    for (Buffer& b : buffers_) {
      b.params.assign(model.num_params(), 0.0f);
      b.grads.assign(model.num_params(), 0.0f);
      b.pull_ops = ModelPullOps(model, config.table_prefix, absl::MakeSpan(b.params));
      b.push_ops = ModelPushOps(model, config.table_prefix, absl::MakeConstSpan(b.grads));
      if (config.layer_norms) {
        b.norms.resize(b.push_ops.size());
        for (size_t i = 0; i < b.push_ops.size(); ++i) b.push_ops[i].layer_norms = &b.norms[i];
      }
    }
  }

  absl::StatusOr<TrainStats> Run(const std::function<void(const std::string&)>& progress);

 private:
  struct Buffer {
    AlignedVector<float> params, grads;
    std::vector<PullRange> pull_ops;
    std::vector<PushRange> push_ops;
    Versions pulled;             // versions the params were read at
    int64_t pushes_at_pull = 0;  // own pushes applied before that read
    // With config.layer_norms, each block's norms that push_ops point to.
    std::vector<proto::LayerNorms> norms;
  };

  // LARS (config.layer_norms): each block's norms of p's parameters and of
  // g's gradient (computed at them), for g's push; the ops view the blocks.
  void SetLayerNorms(Buffer& g, const Buffer& p) {
    for (size_t i = 0; i < g.norms.size(); ++i) {
      g.norms[i] = LayerNormsOf(p.pull_ops[i].out, g.push_ops[i].grads);
    }
  }

  // Reads the parameters into buffer b, as a worker that has pushed
  // pushes_done_ rounds. Runs on one thread at a time.
  absl::Status PullInto(Buffer& b) {
    const uint64_t clock = static_cast<uint64_t>(pushes_done_);
    PullInfo info;
    if (absl::Status s = client_.Pull(b.pull_ops, clock, &info); !s.ok()) return s;
    RecordPull(b, std::move(info), clock);
    return absl::OkStatus();
  }

  // Pushes the gradients accumulated in buffer g, computed with the
  // parameters of buffer p, then zeroes them.
  absl::Status PushFrom(Buffer& g, const Buffer& p, uint64_t clock) {
    Versions pushed;
    SetLayerNorms(g, p);
    if (absl::Status s = client_.Push(g.push_ops, clock, &pushed); !s.ok()) return s;
    RecordPush(p, pushed);
    return absl::OkStatus();
  }

  // The Downpour step in one call: pushes b's gradients, computed with b's
  // parameters, and reads the parameters after the push into b.
  absl::Status PushPullInto(Buffer& b, uint64_t clock) {
    PullInfo info;
    SetLayerNorms(b, b);
    if (absl::Status s = client_.PushPull(b.push_ops, b.pull_ops, clock, &info); !s.ok()) {
      return s;
    }
    RecordPush(b, info.versions);
    RecordPull(b, std::move(info), clock + 1);
    return absl::OkStatus();
  }

  // Staleness of the push (from the versions it reached, against those p's
  // parameters were read at). g's gradients need no zeroing: the next
  // round's first step overwrites them.
  void RecordPush(const Buffer& p, const Versions& pushed) {
    ++pushes_done_;
    uint64_t staleness = 0;
    for (size_t e = 0; e < pushed.size() && e < p.pulled.size(); ++e) {
      if (pushed[e] == 0) continue;
      const int64_t others = static_cast<int64_t>(pushed[e]) - static_cast<int64_t>(p.pulled[e]) -
                             (pushes_done_ - p.pushes_at_pull);
      staleness = std::max<uint64_t>(staleness, others > 0 ? others : 0);
    }
    absl::MutexLock lock(&stats_mu_);
    staleness_sum_ += staleness;
    max_staleness_ = std::max(max_staleness_, staleness);
    ++pushes_;
  }

  // b's parameters were read at `clock` (info from the read).
  void RecordPull(Buffer& b, PullInfo info, uint64_t clock) {
    b.pushes_at_pull = pushes_done_;
    b.pulled = std::move(info.versions);
    const uint64_t lag = clock > info.params_clock ? clock - info.params_clock : 0;
    absl::MutexLock lock(&stats_mu_);
    ++pulls_;
    ++lag_histogram_[std::min<uint64_t>(lag, lag_histogram_.size() - 1)];
    max_clock_lag_ = std::max(max_clock_lag_, lag);
    wait_ += info.waited;
  }

  double MeanStaleness() {
    absl::MutexLock lock(&stats_mu_);
    return pushes_ ? staleness_sum_ / pushes_ : 0.0;
  }

  std::string ProgressLine(int epoch, int64_t steps, double loss, double examples_per_second,
                           absl::Duration elapsed, bool epoch_end) {
    absl::MutexLock lock(&stats_mu_);
    return absl::StrFormat(
        "worker %d/%d epoch %d step %d loss %.4f examples/s %.0f staleness mean %.1f max %d "
        "clock lag max %d waited %.2fs of %.2fs%s",
        config_.worker_index, config_.num_workers, epoch, steps, loss, examples_per_second,
        pushes_ ? staleness_sum_ / pushes_ : 0.0, max_staleness_, max_clock_lag_,
        absl::ToDoubleSeconds(wait_), absl::ToDoubleSeconds(elapsed),
        epoch_end ? " (epoch end)" : "");
  }

  // Run's steps. Start: the loop state and, with overlap, both buffers'
  // first read. ReadIfDue: without overlap, the read every n_fetch steps
  // (and before the first). Step: one minibatch's loss and gradient into
  // the current buffer. EndRound: pushes the round (and, with overlap,
  // reads for the round after next) and picks the next buffers; `last`: no
  // step follows. ReportProgress: a progress line and point every
  // progress_interval and at each epoch's end. Finish: the last partial
  // round and the totals.
  absl::Status Start();
  absl::Status ReadIfDue(bool first_step);
  float Step(absl::Span<const int64_t> rows);
  absl::Status EndRound(bool last);
  void ReportProgress(int epoch, float loss, int batch, bool epoch_end,
                      const std::function<void(const std::string&)>& progress);
  absl::StatusOr<TrainStats> Finish();

  ParamClient& client_;
  const Model& model_;
  const Dataset& shard_;
  const TrainerConfig& config_;
  Buffer buffers_[2];
  int64_t pushes_done_ = 0;  // touched by one thread at a time (FIFO comm queue)

  // The training thread's loop state. With overlap, rounds are pushed and
  // read on comm_ while the next round computes.
  std::unique_ptr<BackgroundQueue> comm_;
  int cur_ = 0;  // buffer whose params and grads the current round uses
  int64_t pending_steps_ = 0;
  bool fresh_params_ = false;  // buffers_[0] was just read (no overlap)
  uint64_t clock_ = 0;
  TrainStats totals_;  // steps, examples, last epoch's loss
  absl::Time start_;
  std::optional<ProgressWindow> window_;
  AlignedVector<float> xb_, grad_;
  std::vector<int32_t> yb_;

  absl::Mutex stats_mu_;
  double staleness_sum_ ABSL_GUARDED_BY(stats_mu_) = 0;
  uint64_t max_staleness_ ABSL_GUARDED_BY(stats_mu_) = 0;
  int64_t pushes_ ABSL_GUARDED_BY(stats_mu_) = 0;
  int64_t pulls_ ABSL_GUARDED_BY(stats_mu_) = 0;
  std::vector<uint64_t> lag_histogram_ ABSL_GUARDED_BY(stats_mu_) = std::vector<uint64_t>(17, 0);
  uint64_t max_clock_lag_ ABSL_GUARDED_BY(stats_mu_) = 0;
  absl::Duration wait_ ABSL_GUARDED_BY(stats_mu_);
};

absl::StatusOr<TrainStats> DownpourRun::Run(
    const std::function<void(const std::string&)>& progress) {
  if (absl::Status s = Start(); !s.ok()) return s;
  bool first_step = true;  // the first step computed reads the parameters
  absl::StatusOr<double> last_epoch_loss = ForEachMinibatch(
      shard_, config_, static_cast<int64_t>(config_.start_clock) * config_.n_push, &totals_.steps,
      [&](const Minibatch& batch) -> absl::StatusOr<float> {
        if (absl::Status s = ReadIfDue(first_step); !s.ok()) return s;
        if (first_step && config_.start_clock > 0 && progress) {
          progress(absl::StrFormat("worker %d/%d resumed at epoch %d step %d (clock %d)",
                                   config_.worker_index, config_.num_workers, batch.epoch,
                                   totals_.steps, clock_));
        }
        first_step = false;
        const float loss = Step(batch.rows);
        if (pending_steps_ == config_.n_push) {
          if (absl::Status s = EndRound(batch.last); !s.ok()) return s;
        }
        ReportProgress(batch.epoch, loss, static_cast<int>(batch.rows.size()), batch.epoch_end,
                       progress);
        return loss;
      });
  if (!last_epoch_loss.ok()) return last_epoch_loss.status();
  totals_.mean_loss_last_epoch = *last_epoch_loss;
  return Finish();
}

absl::Status DownpourRun::Start() {
  xb_.resize(static_cast<size_t>(config_.batch_size) * shard_.dim);
  yb_.resize(config_.batch_size);
  grad_.resize(model_.num_params());
  if (config_.overlap) {
    comm_ = std::make_unique<BackgroundQueue>();
    // Both buffers start from the same parameters.
    if (absl::Status s = PullInto(buffers_[0]); !s.ok()) return s;
    buffers_[1].params = buffers_[0].params;
    buffers_[1].pulled = buffers_[0].pulled;
  }
  clock_ = config_.start_clock;
  start_ = absl::Now();
  window_.emplace(start_, config_.progress_interval);
  return absl::OkStatus();
}

absl::Status DownpourRun::ReadIfDue(bool first_step) {
  // With overlap, rounds read on comm_ (EndRound).
  // totals_.steps counts this step already.
  if (comm_ || ((totals_.steps - 1) % config_.n_fetch != 0 && !first_step)) {
    return absl::OkStatus();
  }
  if (fresh_params_) {
    fresh_params_ = false;  // read by the round's PushPull
    return absl::OkStatus();
  }
  return PullInto(buffers_[0]);
}

float DownpourRun::Step(absl::Span<const int64_t> rows) {
  Buffer& b = buffers_[cur_];
  // The first step of a round writes the round's gradient; later steps add
  // theirs to it.
  const bool first_of_round = pending_steps_ == 0;
  const float loss = BatchLossAndGradient(
      model_, shard_, rows, b.params,
      first_of_round ? absl::MakeSpan(b.grads) : absl::MakeSpan(grad_), config_, &xb_, &yb_);
  if (!first_of_round) {
    for (size_t i = 0; i < grad_.size(); ++i) b.grads[i] += grad_[i];
  }
  ++pending_steps_;
  totals_.examples += static_cast<int64_t>(rows.size());
  return loss;
}

absl::Status DownpourRun::EndRound(bool last) {
  pending_steps_ = 0;
  if (!comm_) {
    if (!last && config_.n_fetch == config_.n_push && config_.consistency == Consistency::kAsync) {
      // The push and the next round's read in one call (PushPull).
      fresh_params_ = true;
      return PushPullInto(buffers_[0], clock_++);
    }
    return PushFrom(buffers_[0], buffers_[0], clock_++);
  }
  Buffer& b = buffers_[cur_];
  const uint64_t round_clock = clock_++;
  comm_->Submit([this, &b, round_clock]() -> absl::Status { return PushPullInto(b, round_clock); });
  cur_ = 1 - cur_;
  // The previous round must be done: its buffers are the next ones.
  return comm_->WaitUntilPending(1);
}

void DownpourRun::ReportProgress(int epoch, float loss, int batch, bool epoch_end,
                                 const std::function<void(const std::string&)>& progress) {
  if (!progress && !config_.on_progress) return;
  std::optional<ProgressPoint> point =
      window_->Step(loss, batch, epoch, totals_.steps, totals_.examples, epoch_end);
  if (!point) return;
  if (progress) {
    progress(ProgressLine(epoch, totals_.steps, point->loss, point->examples_per_second,
                          absl::Now() - start_, epoch_end));
  }
  if (config_.on_progress) {
    point->mean_staleness = MeanStaleness();
    config_.on_progress(*point);
  }
}

absl::StatusOr<TrainStats> DownpourRun::Finish() {
  if (comm_) {
    if (absl::Status s = comm_->WaitUntilPending(0); !s.ok()) return s;
  }
  if (pending_steps_ > 0) {
    // The last partial round, synchronously.
    if (absl::Status s = PushFrom(buffers_[cur_], buffers_[cur_], clock_++); !s.ok()) return s;
  }
  TrainStats stats = totals_;
  stats.seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  stats.examples_per_second = stats.seconds > 0 ? stats.examples / stats.seconds : 0;
  absl::MutexLock lock(&stats_mu_);
  stats.pushes = pushes_;
  stats.pulls = pulls_;
  stats.values_pushed = pushes_ * model_.num_params();
  stats.values_pulled = pulls_ * model_.num_params();
  stats.mean_staleness = pushes_ ? staleness_sum_ / pushes_ : 0;
  stats.max_staleness = max_staleness_;
  stats.clock_lag_histogram = lag_histogram_;
  stats.max_clock_lag = max_clock_lag_;
  stats.wait_seconds = absl::ToDoubleSeconds(wait_);
  return stats;
}

}  // namespace

absl::StatusOr<TrainStats> TrainDownpour(ParamClient& client, const Model& model,
                                         const Dataset& shard, const TrainerConfig& config,
                                         const std::function<void(const std::string&)>& progress) {
  if (absl::Status s = ValidateTrainerConfig(config); !s.ok()) return s;
  if (absl::Status s = CheckShard(model, shard, config.worker_index); !s.ok()) return s;
  DownpourRun run(client, model, shard, config);
  return run.Run(progress);
}

}  // namespace ps
