// The server-side optimizer a training job asks for, by name, as ps_worker's
// flags give it: turned into the optimizer fields of the model's table
// definitions (proto::TableDef; server/optimizer.h has the rules).
#ifndef PS_WORKER_TRAIN_OPTIMIZER_SPEC_H_
#define PS_WORKER_TRAIN_OPTIMIZER_SPEC_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "proto/ps.pb.h"

namespace ps {

// Field names match TableDef's (and ps_worker's flags).
struct OptimizerSpec {
  std::string optimizer = "adagrad";  // sgd adagrad momentum nesterov rmsprop adam ftrl
  double learning_rate = 0.05;
  double initial_accumulator = 0.1;
  double epsilon = 1e-8;
  double momentum = 0.9;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double rho = 0.9;
  double ftrl_beta = 1.0;
  double l1 = 0;
  double l2 = 0;
  double weight_decay = 0;
  double clip_value = 0;
  double clip_norm = 0;
  std::string lr_schedule = "constant";  // constant step inv_sqrt
  uint64_t lr_step_clocks = 1000;
  double lr_gamma = 0.5;
  double lr_decay_offset = 1;
  uint64_t warmup_clocks = 0;
  // LARS (sgd, momentum, nesterov; 0: off): the trust ratio's coefficient
  // and its beta (common/optimizer/lars.h).
  double lars_eta = 0;
  double lars_beta = 0;
};

// A TableDef holding only the spec's optimizer fields (only those of the
// chosen rule and schedule are set), checked as ValidateTableDef would.
// Errors: INVALID_ARGUMENT naming the field (= the flag) and the value,
// e.g. "--optimizer=adamw: expected one of sgd, adagrad, ...".
absl::StatusOr<proto::TableDef> OptimizerFields(const OptimizerSpec& spec);

}  // namespace ps

#endif  // PS_WORKER_TRAIN_OPTIMIZER_SPEC_H_
