// create_table's arguments, as the table definition (proto::TableDef) the
// servers get: the shape, the initializer, and the optimizer with its
// hyper-parameters named as ps_worker's flags (worker/client/optimizer_spec.h)
// plus a sparse table's admission and eviction fields. Checked as the
// servers check definitions (common/table_def.h), so that a bad one raises
// ValueError (TypeError for an unknown keyword or a value of the wrong type)
// before anything is sent. Call with the GIL held.
#ifndef PS_PYTHON_TABLE_ARGS_H_
#define PS_PYTHON_TABLE_ARGS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "proto/ps.pb.h"
#include "pybind11/pybind11.h"

namespace ps::python {

struct TableShape {
  std::string name;
  std::optional<uint64_t> size;  // keys of a dense table; unused for a sparse one
  uint32_t width = 1;
  bool sparse = false;
  uint32_t buckets = 0;
};

struct TableInit {
  std::string initializer;  // "zeros", "uniform" or "normal"
  double low = 0, high = 0, mean = 0, stddev = 0;
  uint64_t seed = 0;
};

struct TableOptimizer {
  std::string name;  // "sgd", "adagrad", ...
  double learning_rate = 0;
  pybind11::dict hyper;  // the other keyword arguments, by name
};

proto::TableDef TableDefOf(const TableShape& shape, const TableInit& init,
                           const TableOptimizer& optimizer);

}  // namespace ps::python

#endif  // PS_PYTHON_TABLE_ARGS_H_
