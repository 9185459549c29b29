#include "common/table_def.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"

namespace ps {
namespace {

absl::Status Bad(const proto::TableDef& def, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("table '", def.name(), "': ", what));
}

}  // namespace

absl::Status ValidateTableDef(const proto::TableDef& def) {
  if (def.name().empty()) return Bad(def, "name is empty");
  if (def.name().size() > 256) return Bad(def, "name longer than 256 bytes");
  if (def.width() == 0) return Bad(def, "width must be >= 1");
  if (def.num_keys() == 0) return Bad(def, "num_keys must be >= 1");
  if (def.num_keys() > kMaxTableValues / def.width()) {
    return Bad(def, absl::StrCat("num_keys * width = ", def.num_keys(), " * ", def.width(),
                                 " exceeds the limit of ", kMaxTableValues, " values"));
  }
  if (!proto::Initializer_IsValid(def.initializer())) {
    return Bad(def, absl::StrCat("unknown initializer ", def.initializer()));
  }
  if (!proto::OptimizerKind_IsValid(def.optimizer())) {
    return Bad(def, absl::StrCat("unknown optimizer ", def.optimizer()));
  }
  for (float v : {def.init_low(), def.init_high(), def.init_mean(), def.init_stddev(),
                  def.learning_rate(), def.initial_accumulator(), def.epsilon()}) {
    if (!std::isfinite(v)) return Bad(def, "a hyper-parameter is not finite");
  }
  if (def.initializer() == proto::INIT_UNIFORM && !(def.init_low() <= def.init_high())) {
    return Bad(def, absl::StrCat("uniform initializer needs init_low <= init_high, got [",
                                 def.init_low(), ", ", def.init_high(), ")"));
  }
  if (def.initializer() == proto::INIT_NORMAL && def.init_stddev() < 0) {
    return Bad(def,
               absl::StrCat("normal initializer needs init_stddev >= 0, got ", def.init_stddev()));
  }
  if (def.learning_rate() <= 0) {
    return Bad(def, absl::StrCat("learning_rate must be > 0, got ", def.learning_rate()));
  }
  if (def.optimizer() == proto::OPT_ADAGRAD) {
    if (def.initial_accumulator() < 0) {
      return Bad(def,
                 absl::StrCat("initial_accumulator must be >= 0, got ", def.initial_accumulator()));
    }
    if (def.epsilon() < 0) {
      return Bad(def, absl::StrCat("epsilon must be >= 0, got ", def.epsilon()));
    }
    if (def.initial_accumulator() == 0 && def.epsilon() == 0) {
      return Bad(def,
                 "AdaGrad needs initial_accumulator > 0 or epsilon > 0 "
                 "(else the first step divides by zero)");
    }
  }
  return absl::OkStatus();
}

bool SameTableDef(const proto::TableDef& a, const proto::TableDef& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

std::string TableDefSummary(const proto::TableDef& def) {
  return absl::StrCat("'", def.name(), "' keys=", def.num_keys(), " width=", def.width(),
                      " init=", proto::Initializer_Name(def.initializer()),
                      " opt=", proto::OptimizerKind_Name(def.optimizer()),
                      " lr=", def.learning_rate());
}

}  // namespace ps
