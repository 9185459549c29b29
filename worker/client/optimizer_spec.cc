#include "worker/client/optimizer_spec.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/table_def.h"

namespace ps {

absl::StatusOr<proto::TableDef> OptimizerFields(const OptimizerSpec& spec) {
  static const std::pair<const char*, proto::OptimizerKind> kRules[] = {
      {"sgd", proto::OPT_SGD},           {"adagrad", proto::OPT_ADAGRAD},
      {"momentum", proto::OPT_MOMENTUM}, {"nesterov", proto::OPT_NESTEROV},
      {"rmsprop", proto::OPT_RMSPROP},   {"adam", proto::OPT_ADAM},
      {"ftrl", proto::OPT_FTRL}};
  static const std::pair<const char*, proto::LrSchedule> kSchedules[] = {
      {"constant", proto::LR_CONSTANT}, {"step", proto::LR_STEP}, {"inv_sqrt", proto::LR_INV_SQRT}};
  proto::TableDef def;
  bool found = false;
  for (const auto& [name, kind] : kRules) {
    if (spec.optimizer == name) {
      def.set_optimizer(kind);
      found = true;
    }
  }
  if (!found) {
    return absl::InvalidArgumentError(
        absl::StrCat("--optimizer=", spec.optimizer,
                     ": expected one of sgd, adagrad, momentum, nesterov, rmsprop, adam, ftrl"));
  }
  found = false;
  for (const auto& [name, schedule] : kSchedules) {
    if (spec.lr_schedule == name) {
      def.set_lr_schedule(schedule);
      found = true;
    }
  }
  if (!found) {
    return absl::InvalidArgumentError(absl::StrCat("--lr_schedule=", spec.lr_schedule,
                                                   ": expected one of constant, step, inv_sqrt"));
  }
  def.set_learning_rate(static_cast<float>(spec.learning_rate));
  switch (def.optimizer()) {
    case proto::OPT_ADAGRAD:
      def.set_initial_accumulator(static_cast<float>(spec.initial_accumulator));
      def.set_epsilon(static_cast<float>(spec.epsilon));
      break;
    case proto::OPT_MOMENTUM:
    case proto::OPT_NESTEROV:
      def.set_momentum(static_cast<float>(spec.momentum));
      break;
    case proto::OPT_RMSPROP:
      def.set_rho(static_cast<float>(spec.rho));
      def.set_epsilon(static_cast<float>(spec.epsilon));
      break;
    case proto::OPT_ADAM:
      def.set_beta1(static_cast<float>(spec.beta1));
      def.set_beta2(static_cast<float>(spec.beta2));
      def.set_epsilon(static_cast<float>(spec.epsilon));
      break;
    case proto::OPT_FTRL:
      def.set_ftrl_beta(static_cast<float>(spec.ftrl_beta));
      def.set_l1(static_cast<float>(spec.l1));
      def.set_l2(static_cast<float>(spec.l2));
      break;
    default:
      break;
  }
  def.set_weight_decay(static_cast<float>(spec.weight_decay));
  def.set_clip_value(static_cast<float>(spec.clip_value));
  def.set_clip_norm(static_cast<float>(spec.clip_norm));
  if (def.lr_schedule() == proto::LR_STEP) {
    def.set_lr_step_clocks(spec.lr_step_clocks);
    def.set_lr_gamma(static_cast<float>(spec.lr_gamma));
  } else if (def.lr_schedule() == proto::LR_INV_SQRT) {
    def.set_lr_decay_offset(static_cast<float>(spec.lr_decay_offset));
  }
  def.set_warmup_clocks(spec.warmup_clocks);
  def.set_lars_eta(static_cast<float>(spec.lars_eta));
  def.set_lars_beta(static_cast<float>(spec.lars_beta));
  // The server checks every table again; checking here names the flag at
  // start-up. The table's own fields are stand-ins.
  proto::TableDef probe = def;
  probe.set_name("flags");
  probe.set_width(1);
  probe.set_num_keys(1);
  if (absl::Status s = ValidateTableDef(probe); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer flags: ", s.message().substr(s.message().find(": ") + 2)));
  }
  return def;
}

}  // namespace ps
