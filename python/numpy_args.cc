#include "python/numpy_args.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/table_def.h"

namespace py = pybind11;

namespace ps::python {

namespace {

// "push: grads"
std::string Named(ArgName arg) { return absl::StrCat(arg.call, ": ", arg.name); }

// "(3, 4)", "(5,)", as NumPy prints shapes.
std::string ShapeOf(const py::array& array) {
  std::vector<py::ssize_t> dims(array.shape(), array.shape() + array.ndim());
  return absl::StrCat("(", absl::StrJoin(dims, ", "), array.ndim() == 1 ? ",)" : ")");
}

std::string DtypeOf(const py::array& array) { return py::str(array.dtype()); }

// The client reads and writes the array's memory through a plain pointer:
// it must be one C-ordered block, and its items aligned. A copy would do
// for values that are only read, never for an array pulled into.
void CheckLayout(ArgName arg, const py::array& array, size_t item_bytes, bool written) {
  const std::string remedy =
      written ? std::string("the values are written into its memory: pass a contiguous array")
              : absl::StrCat("pass numpy.ascontiguousarray(", arg.name, ")");
  if ((array.flags() & py::array::c_style) == 0) {
    throw py::value_error(
        absl::StrCat(Named(arg), " must be C-contiguous; got a strided view of shape ",
                     ShapeOf(array), " (a slice with a step, a transpose or a column); ", remedy));
  }
  if (array.size() > 0 && reinterpret_cast<uintptr_t>(array.data()) % item_bytes != 0) {
    throw py::value_error(absl::StrCat(Named(arg), " is not aligned to its ", item_bytes,
                                       "-byte items (a view at an odd byte offset); ", remedy));
  }
}

void CheckFloat32(ArgName arg, const py::array& array, bool written) {
  if (array.dtype().equal(py::dtype::of<float>())) return;
  throw py::type_error(
      absl::StrCat(Named(arg), " must be a float32 array; got dtype ", DtypeOf(array),
                   ". Nothing is converted: ",
                   written ? "pass a float32 array"
                           : absl::StrCat("pass ", arg.name, ".astype(numpy.float32)")));
}

}  // namespace

py::array ArrayArg(ArgName arg, py::handle value) {
  if (!py::isinstance<py::array>(value)) {
    throw py::type_error(absl::StrCat(Named(arg), " must be a numpy.ndarray; got ",
                                      Py_TYPE(value.ptr())->tp_name,
                                      " (nothing is converted: pass numpy.asarray(...) with the "
                                      "right dtype)"));
  }
  return py::reinterpret_borrow<py::array>(value);
}

absl::Span<const float> FloatValues(ArgName arg, const py::array& array) {
  CheckFloat32(arg, array, /*written=*/false);
  CheckLayout(arg, array, sizeof(float), /*written=*/false);
  return {static_cast<const float*>(array.data()), static_cast<size_t>(array.size())};
}

absl::Span<float> OutputValues(ArgName arg, const py::array& array, uint64_t num_keys,
                               uint32_t width) {
  CheckFloat32(arg, array, /*written=*/true);
  CheckLayout(arg, array, sizeof(float), /*written=*/true);
  if (!array.writeable()) {
    throw py::value_error(
        absl::StrCat(Named(arg), " is read-only; the values are written into it"));
  }
  const uint64_t size = static_cast<uint64_t>(array.size());
  const bool fits = width > 0 && num_keys <= std::numeric_limits<uint64_t>::max() / width &&
                    num_keys * width == size;
  if (!fits) {
    throw py::value_error(absl::StrCat(Named(arg), " has ", size, " elements (shape ",
                                       ShapeOf(array), "); expected ", num_keys, " keys x width ",
                                       width));
  }
  // The same object; mutable_data() is not const (it checks writability again).
  py::array target = array;
  return {static_cast<float*>(target.mutable_data()), static_cast<size_t>(size)};
}

absl::Span<const uint64_t> Keys(ArgName arg, const py::array& array) {
  const bool is_unsigned = array.dtype().equal(py::dtype::of<uint64_t>());
  if (!is_unsigned && !array.dtype().equal(py::dtype::of<int64_t>())) {
    throw py::type_error(absl::StrCat(
        Named(arg), " must be a uint64 array (or int64 >= 0); got dtype ", DtypeOf(array),
        ". Nothing is converted: pass ", arg.name, ".astype(numpy.uint64)"));
  }
  if (array.ndim() != 1) {
    throw py::value_error(absl::StrCat(Named(arg), " must be 1-D; got shape ", ShapeOf(array)));
  }
  CheckLayout(arg, array, sizeof(uint64_t), /*written=*/false);
  // int64 keys have the bits of the same uint64 keys once none is negative.
  const auto* keys = static_cast<const uint64_t*>(array.data());
  const size_t n = static_cast<size_t>(array.size());
  if (!is_unsigned) {
    for (size_t i = 0; i < n; ++i) {
      const auto key = static_cast<int64_t>(keys[i]);
      if (key < 0) {
        throw py::value_error(absl::StrCat(Named(arg), "[", i, "] is ", key,
                                           "; keys must be >= 0 (keys >= 2**63 need uint64)"));
      }
    }
  }
  return {keys, n};
}

bool Overlap(absl::Span<const float> a, absl::Span<const float> b) {
  if (a.empty() || b.empty()) return false;
  const std::less<const float*> before;
  return before(a.data(), b.data() + b.size()) && before(b.data(), a.data() + a.size());
}

// Values a range or key list of `num_keys` keys of `width` takes: at most a
// table's worth (common/table_def.h), so that a mistaken range fails here
// rather than as a huge allocation.
void CheckValues(const char* call, const std::string& table, uint64_t num_keys, uint32_t width) {
  if (width == 0 || num_keys > kMaxTableValues / width) {
    throw py::value_error(absl::StrCat(call, ": table '", table, "': ", num_keys, " keys of width ",
                                       width, " is more than a table holds (", kMaxTableValues,
                                       " values)"));
  }
}

// The array a pull fills: the caller's `out`, checked, or a new
// (num_keys, width) float32 array. Sets *values to its memory.
py::array OutputArray(ArgName arg, const std::string& table, py::handle out, uint64_t num_keys,
                      uint32_t width, absl::Span<float>* values) {
  CheckValues(arg.call, table, num_keys, width);
  py::array array;
  if (out.is_none()) {
    array =
        py::array_t<float>({static_cast<py::ssize_t>(num_keys), static_cast<py::ssize_t>(width)});
  } else {
    array = ArrayArg(arg, out);
  }
  *values = OutputValues(arg, array, num_keys, width);
  return array;
}

// Keys covered by `values` pushed to a table of `width` from key `begin`.
uint64_t KeysOf(ArgName arg, const std::string& table, absl::Span<const float> values,
                uint64_t begin, uint32_t width) {
  if (width == 0 || values.size() % width != 0) {
    throw py::value_error(absl::StrCat(arg.call, ": ", arg.name, " has ", values.size(),
                                       " values, not a whole number of rows of table '", table,
                                       "' (width ", width, ")"));
  }
  const uint64_t num_keys = values.size() / width;
  if (begin > UINT64_MAX - num_keys) {
    throw py::value_error(absl::StrCat(arg.call, ": begin=", begin, " + ", num_keys,
                                       " keys is past the largest key"));
  }
  return num_keys;
}

void CheckSeparate(const char* call, absl::Span<const float> grads, absl::Span<const float> out) {
  if (Overlap(grads, out)) {
    throw py::value_error(absl::StrCat(call,
                                       ": out shares memory with grads; the pulled values "
                                       "would overwrite gradients still being sent: pass a "
                                       "separate array"));
  }
}

void CheckOpCounts(const char* call, std::initializer_list<std::pair<size_t, const char*>> counts) {
  const size_t n = counts.begin()->first;
  bool same = true;
  std::vector<std::string> listed;
  for (const auto& [count, what] : counts) {
    same = same && count == n;
    listed.push_back(absl::StrCat(count, " ", what));
  }
  if (same) return;
  const std::string last = listed.back();
  listed.pop_back();
  throw py::value_error(absl::StrCat(call, ": ", absl::StrJoin(listed, ", "), " and ", last,
                                     ": expected one of each per op"));
}

void CheckSeparateOps(const char* call, const std::vector<absl::Span<float>>& outs,
                      const std::vector<absl::Span<const float>>& grads) {
  for (size_t i = 0; i < outs.size(); ++i) {
    for (size_t j = 0; j < std::max(outs.size(), grads.size()); ++j) {
      if (j != i && j < grads.size() && Overlap(outs[i], grads[j])) {
        throw py::value_error(absl::StrCat(call, ": outs[", i, "] shares memory with grads[", j,
                                           "]: pass separate arrays"));
      }
      if (j < i && Overlap(outs[i], outs[j])) {
        throw py::value_error(absl::StrCat(call, ": outs[", i, "] shares memory with outs[", j,
                                           "]: pass separate arrays"));
      }
    }
  }
}

}  // namespace ps::python
