// The NumPy arrays the Python module's calls take (keys, gradients, output
// buffers), checked and seen as spans over their own memory, which the C++
// client reads from or writes into. Nothing is converted or copied: an
// array that does not fit raises TypeError (not an ndarray, wrong dtype) or
// ValueError (layout, size, read-only, a negative key) naming the call and
// the argument, before anything is sent.
//
// Call with the GIL held. A span stays valid while the caller holds a
// reference to its array (a referenced ndarray cannot be resized).
#ifndef PS_PYTHON_NUMPY_ARGS_H_
#define PS_PYTHON_NUMPY_ARGS_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"

namespace ps::python {

// Which argument of which call, for messages: {"push", "grads"}.
struct ArgName {
  const char* call;
  const char* name;
};

// `value` as an ndarray. TypeError unless it is one (lists and other
// sequences are not converted).
pybind11::array ArrayArg(ArgName arg, pybind11::handle value);

// The values of a float32 (native byte order), C-contiguous, aligned array
// of any shape.
absl::Span<const float> FloatValues(ArgName arg, const pybind11::array& array);

// The same for an array to write into: also writable, with exactly
// num_keys * width elements (any shape).
absl::Span<float> OutputValues(ArgName arg, const pybind11::array& array, uint64_t num_keys,
                               uint32_t width);

// The keys of a 1-D, contiguous, aligned array of uint64, or of int64 whose
// keys are all >= 0 (read as uint64: the same bits).
absl::Span<const uint64_t> Keys(ArgName arg, const pybind11::array& array);

// True when the two spans share memory.
bool Overlap(absl::Span<const float> a, absl::Span<const float> b);

// ValueError unless `num_keys` keys of `width` fit in a table (at most
// kMaxTableValues values, common/table_def.h), so that a mistaken range fails
// here rather than as a huge allocation.
void CheckValues(const char* call, const std::string& table, uint64_t num_keys, uint32_t width);

// The array a pull fills: the caller's `out`, checked, or a new
// (num_keys, width) float32 array. Sets *values to its memory.
pybind11::array OutputArray(ArgName arg, const std::string& table, pybind11::handle out,
                            uint64_t num_keys, uint32_t width, absl::Span<float>* values);

// Keys covered by `values` pushed to a table of `width` from key `begin`;
// ValueError when they are not whole rows or run past the largest key.
uint64_t KeysOf(ArgName arg, const std::string& table, absl::Span<const float> values,
                uint64_t begin, uint32_t width);

// ValueError when `out` shares memory with `grads` (a push-and-pull's).
void CheckSeparate(const char* call, absl::Span<const float> grads, absl::Span<const float> out);

// A call on several tables, op i on each: ValueError unless every count of
// `counts` ({count, what}) is the first's, listing them ("push_many: 2
// tables, 3 grads and 2 begins: expected one of each per op").
void CheckOpCounts(const char* call, std::initializer_list<std::pair<size_t, const char*>> counts);

// The same: ValueError when op i's output (outs[i], named outs[i] in the
// message) shares memory with another op's gradients (grads[j], none when
// empty) or output.
void CheckSeparateOps(const char* call, const std::vector<absl::Span<float>>& outs,
                      const std::vector<absl::Span<const float>>& grads);

}  // namespace ps::python

#endif  // PS_PYTHON_NUMPY_ARGS_H_
