// The data side of Sandblaster L-BFGS on logistic regression: a LibSVM set
// held in memory, cut into portions of consecutive examples, and one
// portion's loss and gradient at given weights. Pure computation on
// caller-owned data; not thread-safe per object (LrData is read-only once
// loaded and may be shared).
//
// The objective the coordinator minimizes is
//   f(w) = 1/n sum_e log(1 + exp(-y_e w.x_e)) + l2/2 ||w||^2,  y_e = +-1,
// where x_e may end with a constant feature 1 at the bias key (the bias is
// regularized as every weight),
// (the same as deploy/lbfgs_reference.py); a portion contributes the sum of
// its examples' losses and of their gradients, and the coordinator divides
// by n and adds the l2 term on the servers.
#ifndef PS_WORKER_LBFGS_LR_PORTIONS_H_
#define PS_WORKER_LBFGS_LR_PORTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ps::lbfgs {

// Examples in CSR form: example e has features [offsets[e], offsets[e+1]).
struct LrData {
  std::vector<uint64_t> indices;
  std::vector<float> values;
  std::vector<uint64_t> offsets{0};
  std::vector<float> labels;  // 0 or 1
  uint64_t max_index = 0;

  size_t size() const { return labels.size(); }
  void Add(float label, absl::Span<const uint64_t> idx, absl::Span<const float> vals);
};

// Reads a LibSVM file (plain or gzip). Errors: the reader's, naming the file
// and line; INVALID_ARGUMENT for a file without examples.
absl::StatusOr<LrData> LoadLrData(const std::string& path);

// Examples [begin, end) of portion p of `portions` over n examples.
inline size_t PortionBegin(size_t n, size_t portions, size_t p) { return n * p / portions; }

// What a portion needs at each evaluation, computed once: its keys (the
// distinct feature indices, and the bias key if any, ascending), per feature
// of its examples the position of its key, and the bias key's position.
struct PortionPlan {
  size_t begin = 0, end = 0;
  std::vector<uint64_t> keys;
  std::vector<uint32_t> positions;
  int64_t bias = -1;  // position of the bias key in `keys`; -1: no bias
};
// `bias_key`: the key of a constant feature 1 every example gets (null:
// none). INVALID_ARGUMENT when an example has a feature at the bias key.
absl::StatusOr<PortionPlan> PlanPortion(const LrData& data, size_t begin, size_t end,
                                        const uint64_t* bias_key = nullptr);

// The portion's loss sum and gradient sum (one per key, float, summed in
// double in example order: the same inputs give the same bits) at
// `weights` (one per plan.keys).
struct PortionResult {
  double loss = 0;
  std::vector<float> gradient;
};
PortionResult LogisticPortion(const LrData& data, const PortionPlan& plan,
                              absl::Span<const float> weights);

}  // namespace ps::lbfgs

#endif  // PS_WORKER_LBFGS_LR_PORTIONS_H_
