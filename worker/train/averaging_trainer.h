// Model averaging (SparkNet, Moritz et al. 2016; Zinkevich et al. 2010) and
// elastic averaging (EASGD, Zhang, Choromanska and LeCun 2015) of a dense
// model on the parameter servers.
//
// Each worker trains its own copy of the model for `every` (tau) local steps
// with a local optimizer (the table optimizer's rule, clipping and
// schedule, applied in this process by common/optimizer), then talks to the
// servers once: the servers hold the center variable in tables whose
// optimizer is plain SGD at learning rate 1 (AveragingTableOptimizer), so a
// push of g moves the center by -g. A round t (clock t):
//
//   average  pull the center c at clock t; local = c; tau local steps;
//            push (c - local) / N at clock t: the center moves by
//            (local - c) / N.
//   easgd    tau local steps (the local copy persists across rounds); pull
//            the center c at clock t; e = alpha * (local - c);
//            local -= e; push -e at clock t: the center moves by e.
//
// Under BSP (consistency BSP, or bounded with staleness 0) a push of round t
// waits until every worker has read round t and a pull of round t + 1 until
// every worker has pushed round t, so every worker reads the same center in
// a round: model averaging's center after round t is exactly the mean of the
// N local copies, and EASGD is its synchronous form (center += alpha * sum of
// (local_i - c)). Under EASGD with BSP the center is read at the round's
// start instead (it cannot change during the round). Async: each worker
// reads and pushes when it gets there; the center then moves by each
// worker's delta / N (averaging) or elastic step (EASGD) as they arrive, and
// EASGD reads the center at the end of its round (the freshest).
//
// Bytes to and from the servers: one push and one pull of the model per tau
// steps, against one of each per step for Downpour with n_fetch = n_push =
// 1.
#ifndef PS_WORKER_TRAIN_AVERAGING_TRAINER_H_
#define PS_WORKER_TRAIN_AVERAGING_TRAINER_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/ps.pb.h"
#include "worker/client/param_client.h"
#include "worker/train/dataset.h"
#include "worker/train/model.h"
#include "worker/train/trainer.h"

namespace ps {

enum class Algorithm {
  kDownpour,  // worker/train/trainer.h
  kAverage,
  kEasgd,
};

// "downpour", "average" or "easgd"; INVALID_ARGUMENT naming the value.
absl::StatusOr<Algorithm> ParseAlgorithm(const std::string& name);
const char* AlgorithmName(Algorithm algorithm);

struct AveragingConfig {
  Algorithm algorithm = Algorithm::kAverage;
  int every = 50;            // tau: local steps per round
  double easgd_alpha = 0.1;  // EASGD's moving rate, in (0, 1]
  // The rule of the local steps: the optimizer fields of a TableDef (kind,
  // learning rate, clipping, schedule; see worker/client/optimizer_spec.h).
  proto::TableDef local_optimizer;
};

// The optimizer fields of the center's tables: SGD at learning rate 1,
// nothing else (a push of g moves the values by exactly -g).
proto::TableDef AveragingTableOptimizer();

// A round's end on n values, the one definition of what each algorithm
// sends (its caller pushes `out` to tables of AveragingTableOptimizer(),
// which move the center by -out):
//   average  out = (reference - local) / num_workers, reference being the
//            center as read at the round's start;
//   easgd    e = alpha (local - reference), reference being the center now;
//            local -= e, out = -e.
void EndRoundValues(const AveragingConfig& averaging, int num_workers,
                    absl::Span<const float> reference, absl::Span<float> local,
                    absl::Span<float> out);

// INVALID_ARGUMENT naming the setting: every >= 1, easgd_alpha in (0, 1],
// a local optimizer MakeOptimizer accepts, and the trainer settings that
// belong to Downpour left at their defaults (n_fetch = n_push = 1, no
// overlap).
absl::Status ValidateAveragingConfig(const AveragingConfig& averaging,
                                     const TrainerConfig& trainer);

// Trains this worker's `shard` by averaging.algorithm (kAverage or kEasgd)
// on the model's tables (prefix trainer.table_prefix, made with
// AveragingTableOptimizer()). The TrainerConfig gives the worker index and
// count, epochs, batch size, consistency, max_steps, seed and progress; its
// start_clock (a restored checkpoint's round) skips start_clock * every
// steps. Progress lines as TrainDownpour's, with the round.
absl::StatusOr<TrainStats> TrainAveraging(ParamClient& client, const Model& model,
                                          const Dataset& shard, const TrainerConfig& trainer,
                                          const AveragingConfig& averaging,
                                          const std::function<void(const std::string&)>& progress);

}  // namespace ps

#endif  // PS_WORKER_TRAIN_AVERAGING_TRAINER_H_
