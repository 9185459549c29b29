#include "python/table_args.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/table_def.h"
#include "worker/client/optimizer_spec.h"

namespace py = pybind11;

namespace ps::python {

namespace {

// The enum value `value` names (Python's spelling), or ValueError naming
// the argument and the choices.
template <typename T>
T Choose(const char* argument, const std::string& value, const std::map<std::string, T>& names) {
  auto it = names.find(value);
  if (it != names.end()) return it->second;
  std::vector<std::string> choices;
  for (const auto& [name, unused] : names) choices.push_back(absl::StrCat("'", name, "'"));
  throw py::value_error(absl::StrCat("create_table: ", argument, "='", value, "': expected one of ",
                                     absl::StrJoin(choices, ", ")));
}

double Number(const std::string& name, py::handle value) {
  const double number = PyFloat_AsDouble(value.ptr());
  if (number == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    throw py::type_error(absl::StrCat("create_table: ", name, " must be a number; got ",
                                      Py_TYPE(value.ptr())->tp_name));
  }
  return number;
}

uint64_t Count(const std::string& name, py::handle value) {
  if (!PyIndex_Check(value.ptr())) {
    throw py::type_error(absl::StrCat("create_table: ", name, " must be an int; got ",
                                      Py_TYPE(value.ptr())->tp_name));
  }
  const py::int_ integer = py::reinterpret_steal<py::int_>(PyNumber_Index(value.ptr()));
  const unsigned long long count = PyLong_AsUnsignedLongLong(integer.ptr());
  if (count == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    throw py::value_error(absl::StrCat("create_table: ", name, "=", std::string(py::repr(integer)),
                                       ": must be in [0, 2**64)"));
  }
  return count;
}

std::string Text(const std::string& name, py::handle value) {
  if (!py::isinstance<py::str>(value)) {
    throw py::type_error(absl::StrCat("create_table: ", name, " must be a str; got ",
                                      Py_TYPE(value.ptr())->tp_name));
  }
  return value.cast<std::string>();
}

// Sets the keyword argument `name`: an OptimizerSpec field
// (worker/client/optimizer_spec.h, whose defaults hold for those not given),
// or a sparse table's admission or eviction field of TableDef. False for a
// name that is neither.
bool SetHyper(const std::string& name, py::handle value, OptimizerSpec* spec,
              proto::TableDef* def) {
  static const auto* const numbers = new std::map<std::string, double OptimizerSpec::*>{
      {"initial_accumulator", &OptimizerSpec::initial_accumulator},
      {"epsilon", &OptimizerSpec::epsilon},
      {"momentum", &OptimizerSpec::momentum},
      {"beta1", &OptimizerSpec::beta1},
      {"beta2", &OptimizerSpec::beta2},
      {"rho", &OptimizerSpec::rho},
      {"ftrl_beta", &OptimizerSpec::ftrl_beta},
      {"l1", &OptimizerSpec::l1},
      {"l2", &OptimizerSpec::l2},
      {"weight_decay", &OptimizerSpec::weight_decay},
      {"clip_value", &OptimizerSpec::clip_value},
      {"clip_norm", &OptimizerSpec::clip_norm},
      {"lr_gamma", &OptimizerSpec::lr_gamma},
      {"lr_decay_offset", &OptimizerSpec::lr_decay_offset}};
  static const auto* const counts = new std::map<std::string, uint64_t OptimizerSpec::*>{
      {"lr_step_clocks", &OptimizerSpec::lr_step_clocks},
      {"warmup_clocks", &OptimizerSpec::warmup_clocks}};
  if (auto it = numbers->find(name); it != numbers->end()) {
    spec->*(it->second) = Number(name, value);
  } else if (auto it = counts->find(name); it != counts->end()) {
    spec->*(it->second) = Count(name, value);
  } else if (name == "lr_schedule") {
    spec->lr_schedule = Text(name, value);
  } else if (name == "admit_after_pushes") {
    // Counts past uint32 stay past the limit ValidateTableDef enforces.
    def->set_admit_after_pushes(
        static_cast<uint32_t>(std::min<uint64_t>(Count(name, value), UINT32_MAX)));
  } else if (name == "admit_probability") {
    def->set_admit_probability(static_cast<float>(Number(name, value)));
  } else if (name == "evict_after_clocks") {
    def->set_evict_after_clocks(Count(name, value));
  } else if (name == "evict_after_seconds") {
    def->set_evict_after_seconds(Count(name, value));
  } else if (name == "max_rows") {
    def->set_max_rows(Count(name, value));
  } else if (name == "eviction") {
    def->set_eviction(Choose<proto::EvictionPolicy>(
        "eviction", Text(name, value), {{"lru", proto::EVICT_LRU}, {"lfu", proto::EVICT_LFU}}));
  } else {
    return false;
  }
  return true;
}

// OptimizerFields names ps_worker's flags ("--optimizer=adamw: ...",
// "optimizer flags: ..."); the keyword arguments have the same names.
std::string AsArguments(absl::string_view message) {
  absl::ConsumePrefix(&message, "--");
  if (absl::ConsumePrefix(&message, "optimizer flags: ")) {
    return absl::StrCat("optimizer arguments: ", message);
  }
  return std::string(message);
}

}  // namespace

proto::TableDef TableDefOf(const TableShape& shape, const TableInit& init,
                           const TableOptimizer& optimizer) {
  OptimizerSpec spec;
  spec.optimizer = optimizer.name;
  spec.learning_rate = optimizer.learning_rate;
  proto::TableDef sparse_fields;
  for (const auto& [key, value] : optimizer.hyper) {
    const std::string name = py::str(key);
    if (!SetHyper(name, value, &spec, &sparse_fields)) {
      throw py::type_error(absl::StrCat(
          "create_table() got an unexpected keyword argument '", name,
          "' (see help(paramserver.Client.create_table) for the optimizer's and sparse tables' "
          "arguments)"));
    }
  }
  absl::StatusOr<proto::TableDef> fields = OptimizerFields(spec);
  if (!fields.ok()) {
    throw py::value_error(absl::StrCat("create_table: ", AsArguments(fields.status().message())));
  }
  proto::TableDef def = *std::move(fields);
  def.MergeFrom(sparse_fields);
  def.set_name(shape.name);
  def.set_width(shape.width);
  def.set_num_buckets(shape.buckets);  // a dense table's must be 0 (checked below)
  if (shape.sparse) {
    def.set_kind(proto::TABLE_SPARSE);
  } else {
    if (!shape.size.has_value()) {
      throw py::value_error(absl::StrCat("create_table: table '", shape.name,
                                         "': size (the number of keys) is required for a dense "
                                         "table"));
    }
    def.set_kind(proto::TABLE_DENSE);
    def.set_num_keys(*shape.size);
  }
  def.set_initializer(Choose<proto::Initializer>("initializer", init.initializer,
                                                 {{"zeros", proto::INIT_ZEROS},
                                                  {"uniform", proto::INIT_UNIFORM},
                                                  {"normal", proto::INIT_NORMAL}}));
  def.set_init_low(static_cast<float>(init.low));
  def.set_init_high(static_cast<float>(init.high));
  def.set_init_mean(static_cast<float>(init.mean));
  def.set_init_stddev(static_cast<float>(init.stddev));
  def.set_seed(init.seed);
  if (absl::Status s = ValidateTableDef(def); !s.ok()) {
    throw py::value_error(absl::StrCat("create_table: ", s.message()));
  }
  return def;
}

}  // namespace ps::python
