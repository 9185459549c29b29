#include "common/table_def.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/optimizer/lbfgs_vectors.h"
#include "google/protobuf/util/message_differencer.h"

namespace ps {
namespace {

absl::Status Bad(const proto::TableDef& def, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("table '", def.name(), "': ", what));
}

// OK when value is in [0, 1) (a decay rate), else names the field.
absl::Status CheckDecay(const proto::TableDef& def, absl::string_view field, float value) {
  if (value >= 0 && value < 1) return absl::OkStatus();
  return Bad(def, absl::StrCat(field, " must be in [0, 1), got ", value));
}

// OK when value >= 0, else names the field.
absl::Status CheckNonNegative(const proto::TableDef& def, absl::string_view field, float value) {
  if (value >= 0) return absl::OkStatus();
  return Bad(def, absl::StrCat(field, " must be >= 0, got ", value));
}

// LARS scales a whole layer's step, so it needs a dense table (the worker
// holds all of its parameters and gradient to take their norms) and a rule
// whose step is proportional to the gradient (not one that normalizes it).
absl::Status ValidateLars(const proto::TableDef& def) {
  if (def.lars_eta() == 0) {
    if (def.lars_beta() != 0) {
      return Bad(def, absl::StrCat("lars_beta (", def.lars_beta(),
                                   ") is used only with LARS on: set lars_eta > 0"));
    }
    return absl::OkStatus();
  }
  if (def.kind() != proto::TABLE_DENSE) {
    return Bad(def, "LARS (lars_eta) is for dense tables, not sparse ones");
  }
  switch (def.optimizer()) {
    case proto::OPT_SGD:
    case proto::OPT_MOMENTUM:
    case proto::OPT_NESTEROV:
      return absl::OkStatus();
    default:
      return Bad(def, absl::StrCat("LARS (lars_eta) needs OPT_SGD, OPT_MOMENTUM or OPT_NESTEROV, "
                                   "not ",
                                   proto::OptimizerKind_Name(def.optimizer()),
                                   " (which normalizes the gradient's scale away)"));
  }
}

// An L-BFGS table: its history length, and none of what a push's update
// rule would use (its pushes only accumulate; the coordinator steps) nor of
// what would drop a row's history (admission, eviction).
absl::Status ValidateLbfgs(const proto::TableDef& def) {
  if (def.optimizer() != proto::OPT_LBFGS) {
    return Bad(def,
               absl::StrCat("lbfgs_memory (", def.lbfgs_memory(), ") is for OPT_LBFGS tables, not ",
                            proto::OptimizerKind_Name(def.optimizer())));
  }
  if (def.lbfgs_memory() < 1 || def.lbfgs_memory() > kMaxLbfgsMemory) {
    return Bad(def, absl::StrCat("OPT_LBFGS needs lbfgs_memory in [1, ", kMaxLbfgsMemory, "], got ",
                                 def.lbfgs_memory()));
  }
  const std::pair<absl::string_view, double> unused[] = {
      {"clip_value", def.clip_value()},
      {"clip_norm", def.clip_norm()},
      {"weight_decay", def.weight_decay()},
      {"lars_eta", def.lars_eta()},
      {"warmup_clocks", static_cast<double>(def.warmup_clocks())},
      {"admit_after_pushes", static_cast<double>(def.admit_after_pushes())},
      {"admit_probability", def.admit_probability()},
      {"evict_after_clocks", static_cast<double>(def.evict_after_clocks())},
      {"evict_after_seconds", static_cast<double>(def.evict_after_seconds())},
      {"max_rows", static_cast<double>(def.max_rows())}};
  for (const auto& [field, value] : unused) {
    if (value != 0) {
      return Bad(def, absl::StrCat(field, " (", value,
                                   ") does not apply to OPT_LBFGS tables (pushes accumulate the "
                                   "gradient; rows keep their history): leave it 0"));
    }
  }
  return absl::OkStatus();
}

// The optimizer's hyper-parameters, the schedule's and the gradient
// transform's. Each range is checked whichever optimizer and schedule the
// table uses (the defaults, 0, are in range), so that a value meant for
// another rule cannot hide a typo; what only one rule needs is checked for
// that rule.
absl::Status ValidateOptimizer(const proto::TableDef& def) {
  if (def.optimizer() == proto::OPT_LBFGS || def.lbfgs_memory() != 0) return ValidateLbfgs(def);
  if (def.learning_rate() <= 0) {
    return Bad(def, absl::StrCat("learning_rate must be > 0, got ", def.learning_rate()));
  }
  const std::pair<absl::string_view, float> decays[] = {{"momentum", def.momentum()},
                                                        {"beta1", def.beta1()},
                                                        {"beta2", def.beta2()},
                                                        {"rho", def.rho()}};
  for (const auto& [field, value] : decays) {
    if (absl::Status s = CheckDecay(def, field, value); !s.ok()) return s;
  }
  const std::pair<absl::string_view, float> non_negative[] = {
      {"initial_accumulator", def.initial_accumulator()},
      {"epsilon", def.epsilon()},
      {"ftrl_beta", def.ftrl_beta()},
      {"l1", def.l1()},
      {"l2", def.l2()},
      {"weight_decay", def.weight_decay()},
      {"clip_value", def.clip_value()},
      {"clip_norm", def.clip_norm()},
      {"lars_eta", def.lars_eta()},
      {"lars_beta", def.lars_beta()}};
  for (const auto& [field, value] : non_negative) {
    if (absl::Status s = CheckNonNegative(def, field, value); !s.ok()) return s;
  }
  if (absl::Status s = ValidateLars(def); !s.ok()) return s;
  switch (def.optimizer()) {
    case proto::OPT_ADAGRAD:
      if (def.initial_accumulator() == 0 && def.epsilon() == 0) {
        return Bad(def,
                   "AdaGrad needs initial_accumulator > 0 or epsilon > 0 "
                   "(else the first step divides by zero)");
      }
      break;
    case proto::OPT_RMSPROP:
    case proto::OPT_ADAM:
      if (def.epsilon() == 0) {
        return Bad(def, absl::StrCat(proto::OptimizerKind_Name(def.optimizer()),
                                     " needs epsilon > 0 (else a value whose gradients "
                                     "were all 0 divides 0 by 0)"));
      }
      break;
    default:
      break;
  }
  switch (def.lr_schedule()) {
    case proto::LR_STEP:
      if (def.lr_step_clocks() == 0) return Bad(def, "LR_STEP needs lr_step_clocks >= 1, got 0");
      if (!(def.lr_gamma() > 0 && def.lr_gamma() <= 1)) {
        return Bad(def, absl::StrCat("LR_STEP needs lr_gamma in (0, 1], got ", def.lr_gamma()));
      }
      break;
    case proto::LR_INV_SQRT:
      if (!(def.lr_decay_offset() > 0)) {
        return Bad(def, absl::StrCat("LR_INV_SQRT needs lr_decay_offset > 0, got ",
                                     def.lr_decay_offset()));
      }
      break;
    default:
      break;
  }
  return absl::OkStatus();
}

// The kind's own fields: a sparse table's admission and eviction rules, a
// dense table's keys.
absl::Status ValidateKindFields(const proto::TableDef& def) {
  if (def.kind() == proto::TABLE_SPARSE) {
    if (def.num_keys() != 0) {
      return Bad(def, absl::StrCat("a sparse table takes any uint64 key: leave num_keys 0, got ",
                                   def.num_keys()));
    }
    if (def.width() > kMaxSparseWidth) {
      return Bad(def, absl::StrCat("width must be <= ", kMaxSparseWidth,
                                   " for a sparse table, got ", def.width()));
    }
    if (def.num_buckets() > kMaxSparseBuckets) {
      return Bad(def, absl::StrCat("num_buckets must be <= ", kMaxSparseBuckets, ", got ",
                                   def.num_buckets()));
    }
    if (def.admit_after_pushes() > kMaxAdmitAfterPushes) {
      return Bad(def, absl::StrCat("admit_after_pushes must be <= ", kMaxAdmitAfterPushes, ", got ",
                                   def.admit_after_pushes()));
    }
    if (!(def.admit_probability() >= 0 && def.admit_probability() <= 1)) {
      return Bad(
          def, absl::StrCat("admit_probability must be in [0, 1], got ", def.admit_probability()));
    }
    if (!proto::EvictionPolicy_IsValid(def.eviction())) {
      return Bad(def, absl::StrCat("unknown eviction ", def.eviction()));
    }
    if (def.evict_after_clocks() > 0 && def.evict_after_seconds() > 0) {
      return Bad(def, "set evict_after_clocks or evict_after_seconds, not both");
    }
    if (!proto::TableStorage_IsValid(def.storage())) {
      return Bad(def, absl::StrCat("unknown storage ", def.storage()));
    }
    if (def.storage() == proto::STORAGE_TIERED) {
      if (def.cache_mb() == 0) {
        return Bad(def, "a tiered table (storage STORAGE_TIERED) needs cache_mb >= 1");
      }
    } else if (def.cache_mb() != 0) {
      return Bad(def, "cache_mb is for tiered tables (storage STORAGE_TIERED)");
    }
  } else if (def.num_buckets() != 0 || def.admit_after_pushes() != 0 ||
             def.admit_probability() != 0 || def.evict_after_clocks() != 0 ||
             def.evict_after_seconds() != 0 || def.max_rows() != 0 || def.storage() != 0 ||
             def.cache_mb() != 0) {
    return Bad(def,
               "num_buckets, admission (admit_*), eviction (evict_*, max_rows) and storage "
               "(storage, cache_mb) are for sparse tables (kind TABLE_SPARSE), not dense ones");
  } else if (def.num_keys() == 0) {
    return Bad(def, "num_keys must be >= 1");
  }
  if (def.kind() == proto::TABLE_DENSE && def.num_keys() > kMaxTableValues / def.width()) {
    return Bad(def, absl::StrCat("num_keys * width = ", def.num_keys(), " * ", def.width(),
                                 " exceeds the limit of ", kMaxTableValues, " values"));
  }
  return absl::OkStatus();
}

// The enums, every float field finite, and the initializer's range.
absl::Status ValidateInitAndFloats(const proto::TableDef& def) {
  if (!proto::Initializer_IsValid(def.initializer())) {
    return Bad(def, absl::StrCat("unknown initializer ", def.initializer()));
  }
  if (!proto::OptimizerKind_IsValid(def.optimizer())) {
    return Bad(def, absl::StrCat("unknown optimizer ", def.optimizer()));
  }
  if (!proto::LrSchedule_IsValid(def.lr_schedule())) {
    return Bad(def, absl::StrCat("unknown lr_schedule ", def.lr_schedule()));
  }
  const std::pair<absl::string_view, float> floats[] = {
      {"init_low", def.init_low()},
      {"init_high", def.init_high()},
      {"init_mean", def.init_mean()},
      {"init_stddev", def.init_stddev()},
      {"learning_rate", def.learning_rate()},
      {"initial_accumulator", def.initial_accumulator()},
      {"epsilon", def.epsilon()},
      {"momentum", def.momentum()},
      {"beta1", def.beta1()},
      {"beta2", def.beta2()},
      {"rho", def.rho()},
      {"ftrl_beta", def.ftrl_beta()},
      {"l1", def.l1()},
      {"l2", def.l2()},
      {"weight_decay", def.weight_decay()},
      {"clip_value", def.clip_value()},
      {"clip_norm", def.clip_norm()},
      {"lr_gamma", def.lr_gamma()},
      {"lr_decay_offset", def.lr_decay_offset()},
      {"lars_eta", def.lars_eta()},
      {"lars_beta", def.lars_beta()}};
  for (const auto& [field, value] : floats) {
    if (!std::isfinite(value)) return Bad(def, absl::StrCat(field, " must be finite, got ", value));
  }
  if (def.initializer() == proto::INIT_UNIFORM && !(def.init_low() <= def.init_high())) {
    return Bad(def, absl::StrCat("uniform initializer needs init_low <= init_high, got [",
                                 def.init_low(), ", ", def.init_high(), ")"));
  }
  if (def.initializer() == proto::INIT_NORMAL && def.init_stddev() < 0) {
    return Bad(def,
               absl::StrCat("normal initializer needs init_stddev >= 0, got ", def.init_stddev()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTableDef(const proto::TableDef& def) {
  if (def.name().empty()) return Bad(def, "name is empty");
  if (def.name().size() > 256) return Bad(def, "name longer than 256 bytes");
  if (!proto::TableKind_IsValid(def.kind())) {
    return Bad(def, absl::StrCat("unknown kind ", def.kind()));
  }
  if (def.width() == 0) return Bad(def, "width must be >= 1");
  if (absl::Status s = ValidateKindFields(def); !s.ok()) return s;
  if (absl::Status s = ValidateInitAndFloats(def); !s.ok()) return s;
  return ValidateOptimizer(def);
}

bool SameTableDef(const proto::TableDef& a, const proto::TableDef& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

std::string TableDefSummary(const proto::TableDef& def) {
  std::string s = absl::StrCat("'", def.name(), "' keys=", def.num_keys(), " width=", def.width(),
                               " init=", proto::Initializer_Name(def.initializer()),
                               " opt=", proto::OptimizerKind_Name(def.optimizer()),
                               " lr=", def.learning_rate());
  // The rule's own hyper-parameters, then whatever else is not the default.
  switch (def.optimizer()) {
    case proto::OPT_ADAGRAD:
      absl::StrAppend(&s, " initial_accumulator=", def.initial_accumulator(),
                      " epsilon=", def.epsilon());
      break;
    case proto::OPT_MOMENTUM:
    case proto::OPT_NESTEROV:
      absl::StrAppend(&s, " momentum=", def.momentum());
      break;
    case proto::OPT_RMSPROP:
      absl::StrAppend(&s, " rho=", def.rho(), " epsilon=", def.epsilon());
      break;
    case proto::OPT_ADAM:
      absl::StrAppend(&s, " beta1=", def.beta1(), " beta2=", def.beta2(),
                      " epsilon=", def.epsilon());
      break;
    case proto::OPT_FTRL:
      absl::StrAppend(&s, " ftrl_beta=", def.ftrl_beta(), " l1=", def.l1(), " l2=", def.l2());
      break;
    case proto::OPT_LBFGS:
      absl::StrAppend(&s, " memory=", def.lbfgs_memory());
      break;
    default:
      break;
  }
  if (def.lr_schedule() == proto::LR_STEP) {
    absl::StrAppend(&s, " schedule=LR_STEP(gamma=", def.lr_gamma(), " every=", def.lr_step_clocks(),
                    ")");
  } else if (def.lr_schedule() == proto::LR_INV_SQRT) {
    absl::StrAppend(&s, " schedule=LR_INV_SQRT(offset=", def.lr_decay_offset(), ")");
  }
  if (def.warmup_clocks() != 0) absl::StrAppend(&s, " warmup=", def.warmup_clocks());
  if (def.clip_value() != 0) absl::StrAppend(&s, " clip_value=", def.clip_value());
  if (def.clip_norm() != 0) absl::StrAppend(&s, " clip_norm=", def.clip_norm());
  if (def.weight_decay() != 0) absl::StrAppend(&s, " weight_decay=", def.weight_decay());
  if (def.lars_eta() != 0) {
    absl::StrAppend(&s, " lars=(eta=", def.lars_eta(), " beta=", def.lars_beta(), ")");
  }
  if (def.kind() != proto::TABLE_DENSE) {
    absl::StrAppend(&s, " kind=", proto::TableKind_Name(def.kind()));
  }
  return s;
}

}  // namespace ps
