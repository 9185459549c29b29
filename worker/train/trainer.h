// Downpour SGD (Dean et al., 2012) on top of a ParamClient (PsClient for a
// real cluster).
//
// Each worker owns a shard of the examples and a local copy of the model
// parameters. Every n_fetch steps it pulls the parameters from the servers;
// every step it computes a mini-batch gradient with the current (possibly
// stale) copy and accumulates it; every n_push steps it pushes the
// accumulated gradient, which the servers apply with the table's optimizer.
// Each model block is one table "<prefix>/<block>". Functions here are
// thread-compatible: run one TrainDownpour per thread, each with its data.
#ifndef PS_WORKER_TRAIN_TRAINER_H_
#define PS_WORKER_TRAIN_TRAINER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/aligned_vector.h"
#include "proto/ps.pb.h"
#include "worker/client/param_client.h"
#include "worker/train/dataset.h"
#include "worker/train/model.h"
#include "worker/train/progress.h"

namespace ps {

// The consistency model the servers enforce on this worker's pulls and
// pushes (ps_worker --consistency). The trainer does not send it (the client
// does); ValidateTrainerConfig uses it to refuse settings that would deadlock.
enum class Consistency {
  kAsync,    // pulls and pushes never wait
  kBounded,  // a pull at clock t waits until every live worker completed the
             // rounds < t - staleness
  kBsp,      // bounded with staleness 0, and a push of round t waits until
             // every live worker has read round t
};

struct TrainerConfig {
  int worker_index = 0;
  int num_workers = 1;
  int epochs = 1;
  int batch_size = 64;
  int n_fetch = 1;  // pull every n_fetch steps
  int n_push = 1;   // push every n_push steps
  Consistency consistency = Consistency::kAsync;
  int staleness = 0;  // tau, for kBounded (kBounded with 0 behaves as kBsp)
  // Overlap communication with computation: each round's push and pull run
  // in the background while the next round computes with the parameters of
  // the round before (one round more stale). Requires n_fetch == n_push.
  bool overlap = false;
  // LARS: send each block's layer norms (of the parameters a push's
  // gradient was computed at, and of the gradient) with its push, as tables
  // with lars_eta require (common/optimizer/lars.h).
  bool layer_norms = false;
  // Straggler injection: computing a step takes `slowdown` times as long
  // (the worker sleeps for the extra time). 1 = normal speed.
  double slowdown = 1.0;
  int64_t max_steps = 0;  // > 0: stop after this many steps (counting skipped ones)
  // Resuming after a restore: the rounds this worker had completed (its
  // clock in the checkpoint). The first start_clock * n_push steps are
  // skipped, drawing the same shuffles, so that training continues at the
  // epoch and step where the checkpoint's cut left it, with the next round
  // at clock start_clock.
  uint64_t start_clock = 0;
  uint64_t seed = 1;  // shuffling
  std::string table_prefix = "model";
  absl::Duration progress_interval = absl::Seconds(5);
  // Gets each progress line's numbers too (when set).
  ProgressSink on_progress;
};

// Validates the config. INVALID_ARGUMENT naming the field and its value.
// BSP (kBsp, or kBounded with staleness 0) needs n_fetch == n_push: a BSP push
// of round t waits until every live worker has read round t, so a worker
// must pull at the start of every round. With n_fetch > n_push some rounds
// have no pull, and with an n_fetch that does not divide n_push the last,
// partial round may have none: every worker then waits forever. With n_fetch
// a proper divisor of n_push nothing deadlocks, but the extra pulls within a
// round read other workers' pushes of the same round, which is not BSP.
// Async and bounded staleness >= 1 allow any n_fetch and n_push: pushes never
// wait there, and the worker with the lowest clock can always pull.
absl::Status ValidateTrainerConfig(const TrainerConfig& config);

struct TrainStats {
  int64_t steps = 0;
  int64_t examples = 0;
  int64_t pushes = 0;
  int64_t pulls = 0;
  // Parameter values sent to the servers (gradients, deltas) and read from
  // them: the payload of the pushes and pulls, 4 bytes each on the wire
  // as f32.
  int64_t values_pushed = 0;
  int64_t values_pulled = 0;
  double seconds = 0;
  double examples_per_second = 0;
  double mean_loss_last_epoch = 0;
  // Staleness of a push: updates by other workers applied to the parameters
  // between the pull they were read at and this push.
  double mean_staleness = 0;
  uint64_t max_staleness = 0;
  // Clock lag of a pull: the worker's clock minus the clock of the
  // parameters it got (rounds of some worker possibly missing). Histogram:
  // entry i counts pulls with lag i (last entry: that many or more).
  std::vector<uint64_t> clock_lag_histogram = std::vector<uint64_t>(17, 0);
  uint64_t max_clock_lag = 0;
  // Time pulls spent waiting for slower workers, as the servers reported.
  double wait_seconds = 0;
};

// One table per model block: width 1, num_keys = block size, uniform
// initializer (zeros for biases), seeded per block; optimizer and
// hyper-parameters copied from `optimizer`, except LARS (lars_eta,
// lars_beta), which only the weight matrices get: biases keep the plain
// rule, as in You et al.'s LARS.
std::vector<proto::TableDef> ModelTables(const Model& model, const std::string& prefix,
                                         const proto::TableDef& optimizer, uint64_t seed);

// Creates the tables on every server (idempotent). An error names the table
// ("creating table 'NAME': ...") and keeps the server's code.
absl::Status CreateModelTables(ParamClient& client, const std::vector<proto::TableDef>& tables);

// Pulls all of the model's parameters into `params` (num_params floats), as
// a worker at `clock`.
absl::Status PullParams(ParamClient& client, const Model& model, const std::string& prefix,
                        absl::Span<float> params, uint64_t clock = 0, PullInfo* info = nullptr);

// FAILED_PRECONDITION for a shard without examples, INVALID_ARGUMENT when
// its examples' dimension is not the model's input's.
absl::Status CheckShard(const Model& model, const Dataset& shard, int worker_index);

// The loss of the shard's examples `rows` at `params`, and its gradient
// into `grad`, gathering the batch into the scratch buffers *xb and *yb
// (xb, params and grad aligned, AlignedVector: the gradient's bits then
// do not depend on where they were allocated)
// (sized for config.batch_size examples); then, with config.slowdown > 1,
// sleeps (slowdown - 1) times the compute time (straggler injection).
float BatchLossAndGradient(const Model& model, const Dataset& shard, absl::Span<const int64_t> rows,
                           absl::Span<const float> params, absl::Span<float> grad,
                           const TrainerConfig& config, AlignedVector<float>* xb,
                           std::vector<int32_t>* yb);

// One minibatch of a trainer's run.
struct Minibatch {
  int epoch = 1;                   // 1-based
  absl::Span<const int64_t> rows;  // its examples' rows in the shard
  bool epoch_end = false;          // the epoch's last batch, or the run's
  bool last = false;               // the run's last batch
};
// The minibatches of a trainer's run over `shard`: each epoch shuffles the
// examples' order (seeded by config.seed and config.worker_index) and cuts
// it into batches of config.batch_size, until config.epochs epochs or
// config.max_steps (> 0) batches. `*steps` counts every batch, before
// `train` gets it. The first `skip` batches (those of the rounds a resumed
// run restored) are counted but not trained on, drawing the same shuffles.
// `train` trains on a batch and returns its loss; the first error stops
// the run and is returned. Returns the last epoch's mean loss.
absl::StatusOr<double> ForEachMinibatch(
    const Dataset& shard, const TrainerConfig& config, int64_t skip, int64_t* steps,
    const std::function<absl::StatusOr<float>(const Minibatch& batch)>& train);

// Runs Downpour SGD over `shard` (this worker's examples). `progress`, when
// set, receives a line every progress_interval and one at each epoch end.
absl::StatusOr<TrainStats> TrainDownpour(ParamClient& client, const Model& model,
                                         const Dataset& shard, const TrainerConfig& config,
                                         const std::function<void(const std::string&)>& progress);

}  // namespace ps

#endif  // PS_WORKER_TRAIN_TRAINER_H_
