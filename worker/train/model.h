// Classification models (softmax regression, ReLU MLP) evaluated with Eigen
// over a caller-owned flat parameter vector. The vector is a concatenation of
// named blocks (blocks()), each of which becomes one parameter-server table.
// Models hold only their shape, never parameters or scratch buffers, so every
// const method is thread-safe; a Model is immutable after construction.
//
// Layout: a network with layer widths n_0 = dim, n_1, ..., n_L = num_classes
// has, for each layer l = 0..L-1, the blocks
//   "fc<l>/w"  n_l x n_{l+1} floats, ROW-MAJOR: element (i, j) at i*n_{l+1}+j
//              is the weight from input unit i to output unit j, so a layer
//              computes Z = X W + b for row-major X (batch x n_l);
//              init_bound = sqrt(6 / (n_l + n_{l+1})) (Glorot uniform);
//   "fc<l>/b"  n_{l+1} floats, init_bound 0 (zeros).
// Hidden layers apply ReLU; the last layer feeds a softmax. Softmax regression
// is the case L = 1 (blocks "fc0/w", "fc0/b").
#ifndef PS_WORKER_TRAIN_MODEL_H_
#define PS_WORKER_TRAIN_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/train/dataset.h"

namespace ps {

// One named slice of the flat parameter vector. Initial values are drawn
// uniformly from (-init_bound, init_bound); init_bound 0 means zeros.
struct ParamBlock {
  std::string name;
  int64_t size;
  float init_bound;
};

class Model {
 public:
  virtual ~Model() = default;

  // "softmax" or "mlp".
  virtual std::string name() const = 0;

  // Layout of the flat parameter vector, in order (see the file comment).
  virtual const std::vector<ParamBlock>& blocks() const = 0;

  // Width of an input row (dim) and number of output classes.
  virtual int input_dim() const = 0;
  virtual int num_classes() const = 0;

  // Sum of block sizes.
  int64_t num_params() const;

  // Mean cross-entropy loss over the `batch` rows of x (row-major,
  // batch x dim) with the given labels (each in [0, num_classes)); writes
  // d(loss)/d(params) into grad, overwriting it. batch 0 gives loss 0 and a
  // zero gradient. Aborts if params or grad does not have num_params()
  // elements or a label is out of range (programming errors).
  virtual float LossAndGradient(absl::Span<const float> params, const float* x,
                                const int32_t* labels, int batch, absl::Span<float> grad) const = 0;

  // Writes the predicted class (argmax of the logits) of each of the `batch`
  // rows of x into out[0..batch). Aborts if params has the wrong size.
  virtual void Predict(absl::Span<const float> params, const float* x, int batch,
                       int32_t* out) const = 0;
};

// Softmax regression: one layer dim -> num_classes. Requires dim >= 1 and
// num_classes >= 2 (aborts otherwise; MakeModel validates instead).
std::unique_ptr<Model> MakeSoftmaxRegression(int dim, int num_classes);

// MLP dim -> hidden[0] -> ... -> num_classes with ReLU hidden layers.
// Requires dim >= 1, num_classes >= 2, hidden non-empty with every width >= 1
// (aborts otherwise; MakeModel validates instead).
std::unique_ptr<Model> MakeMlp(int dim, std::vector<int> hidden, int num_classes);

// Builds the model named by `kind`: "softmax" (ignores hidden) or "mlp".
// INVALID_ARGUMENT (naming the offending value) for any other kind, for
// dim < 1, num_classes < 2, or an mlp whose hidden list is empty or holds a
// width < 1.
absl::StatusOr<std::unique_ptr<Model>> MakeModel(const std::string& kind, int dim,
                                                 std::vector<int> hidden, int num_classes);

// A fresh parameter vector for m: each block drawn uniformly from
// (-init_bound, init_bound) (zeros where init_bound is 0). Deterministic for a
// seed.
std::vector<float> InitialParams(const Model& m, uint64_t seed);

// Fraction of data's rows that m classifies correctly, evaluated in batches;
// 0 for an empty data set. Aborts unless data.dim == m.input_dim() and
// params has m.num_params() elements.
double Accuracy(const Model& m, absl::Span<const float> params, const Dataset& data);

}  // namespace ps

#endif  // PS_WORKER_TRAIN_MODEL_H_
