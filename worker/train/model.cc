#include "worker/train/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <utility>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ps {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using MatrixMap = Eigen::Map<RowMatrix>;
using ConstRowVectorMap = Eigen::Map<const Eigen::RowVectorXf>;
using RowVectorMap = Eigen::Map<Eigen::RowVectorXf>;

// Aborts with a message unless `ok`; guards against programming errors in
// hot paths that cannot return a Status. The message is built only on failure.
template <typename... Parts>
void Require(bool ok, const Parts&... parts) {
  if (ok) return;
  std::fprintf(stderr, "ps::Model contract violation: %s\n", absl::StrCat(parts...).c_str());
  std::abort();
}

// A fully connected network: widths_ = {dim, hidden..., num_classes}, ReLU on
// every layer but the last, softmax cross-entropy on the last.
class FeedForwardNet : public Model {
 public:
  FeedForwardNet(std::string name, std::vector<int> widths)
      : name_(std::move(name)), widths_(std::move(widths)) {
    int64_t offset = 0;
    for (size_t l = 0; l + 1 < widths_.size(); ++l) {
      const int64_t in = widths_[l], out = widths_[l + 1];
      const float bound = static_cast<float>(std::sqrt(6.0 / (in + out)));
      const std::string layer = absl::StrCat("fc", l);
      w_offsets_.push_back(offset);
      blocks_.push_back({layer + "/w", in * out, bound});
      offset += in * out;
      b_offsets_.push_back(offset);
      blocks_.push_back({layer + "/b", out, 0.0f});
      offset += out;
    }
    num_params_ = offset;
  }

  std::string name() const override { return name_; }
  const std::vector<ParamBlock>& blocks() const override { return blocks_; }
  int input_dim() const override { return widths_.front(); }
  int num_classes() const override { return widths_.back(); }

  float LossAndGradient(absl::Span<const float> params, const float* x, const int32_t* labels,
                        int batch, absl::Span<float> grad) const override {
    CheckParams(params);
    Require(static_cast<int64_t>(grad.size()) == num_params_, "grad has ", grad.size(),
            " elements, model ", name_, " has ", num_params_);
    Require(batch >= 0, "negative batch ", batch);
    const int k = num_classes();
    for (int i = 0; i < batch; ++i) {
      Require(labels[i] >= 0 && labels[i] < k, "label ", labels[i], " of row ", i,
              " is outside [0, ", k, ")");
    }
    if (batch == 0) {
      std::fill(grad.begin(), grad.end(), 0.0f);
      return 0.0f;
    }

    std::vector<RowMatrix> hidden;
    RowMatrix logits = Forward(params, x, batch, hidden);

    // Stable softmax: shift each row by its max, so exp() <= 1.
    const Eigen::VectorXf row_max = logits.rowwise().maxCoeff();
    logits.colwise() -= row_max;
    RowMatrix probs = logits.array().exp().matrix();
    const Eigen::VectorXf row_sum = probs.rowwise().sum();
    double loss = 0;
    for (int i = 0; i < batch; ++i) {
      loss += std::log(row_sum[i]) - logits(i, labels[i]);
    }
    // d(mean loss)/d(logits) = (softmax - onehot) / batch.
    probs.array().colwise() /= row_sum.array();
    for (int i = 0; i < batch; ++i) probs(i, labels[i]) -= 1.0f;
    probs *= 1.0f / batch;

    RowMatrix delta = std::move(probs);  // d(loss)/d(pre-activation of layer)
    for (int l = num_layers() - 1; l >= 0; --l) {
      if (l == 0) {
        GradWeights(grad, 0).noalias() = ConstMatrixMap(x, batch, widths_[0]).transpose() * delta;
      } else {
        GradWeights(grad, l).noalias() = hidden[l - 1].transpose() * delta;
      }
      GradBias(grad, l) = delta.colwise().sum();
      if (l == 0) break;
      RowMatrix prev = delta * Weights(params, l).transpose();
      // ReLU'(z) = [z > 0] = [relu(z) > 0].
      prev.array() *= (hidden[l - 1].array() > 0.0f).cast<float>();
      delta = std::move(prev);
    }
    return static_cast<float>(loss / batch);
  }

  void Predict(absl::Span<const float> params, const float* x, int batch,
               int32_t* out) const override {
    CheckParams(params);
    if (batch <= 0) return;
    std::vector<RowMatrix> hidden;
    const RowMatrix logits = Forward(params, x, batch, hidden);
    for (int i = 0; i < batch; ++i) {
      Eigen::Index best;
      logits.row(i).maxCoeff(&best);
      out[i] = static_cast<int32_t>(best);
    }
  }

 private:
  int num_layers() const { return static_cast<int>(widths_.size()) - 1; }

  void CheckParams(absl::Span<const float> params) const {
    Require(static_cast<int64_t>(params.size()) == num_params_, "params has ", params.size(),
            " elements, model ", name_, " has ", num_params_);
  }

  ConstMatrixMap Weights(absl::Span<const float> params, int l) const {
    return ConstMatrixMap(params.data() + w_offsets_[l], widths_[l], widths_[l + 1]);
  }
  ConstRowVectorMap Bias(absl::Span<const float> params, int l) const {
    return ConstRowVectorMap(params.data() + b_offsets_[l], widths_[l + 1]);
  }
  MatrixMap GradWeights(absl::Span<float> grad, int l) const {
    return MatrixMap(grad.data() + w_offsets_[l], widths_[l], widths_[l + 1]);
  }
  RowVectorMap GradBias(absl::Span<float> grad, int l) const {
    return RowVectorMap(grad.data() + b_offsets_[l], widths_[l + 1]);
  }

  // Runs the network on x (batch x dim). Fills `hidden` with the post-ReLU
  // activation of each hidden layer and returns the logits (batch x classes).
  RowMatrix Forward(absl::Span<const float> params, const float* x, int batch,
                    std::vector<RowMatrix>& hidden) const {
    hidden.resize(num_layers() - 1);
    for (int l = 0; l < num_layers(); ++l) {
      RowMatrix z(batch, widths_[l + 1]);
      if (l == 0) {
        z.noalias() = ConstMatrixMap(x, batch, widths_[0]) * Weights(params, 0);
      } else {
        z.noalias() = hidden[l - 1] * Weights(params, l);
      }
      z.rowwise() += Bias(params, l);
      if (l == num_layers() - 1) return z;
      hidden[l] = z.cwiseMax(0.0f);
    }
    return RowMatrix();  // unreachable: num_layers() >= 1
  }

  std::string name_;
  std::vector<int> widths_;
  std::vector<ParamBlock> blocks_;
  std::vector<int64_t> w_offsets_;  // per layer, into the flat vector
  std::vector<int64_t> b_offsets_;
  int64_t num_params_ = 0;
};

// Empty when the shape is valid, else what is wrong with it.
std::string ShapeProblem(int dim, const std::vector<int>& hidden, int num_classes,
                         bool need_hidden) {
  if (dim < 1) return absl::StrCat("input dim must be >= 1, got ", dim);
  if (num_classes < 2) {
    return absl::StrCat("num_classes must be >= 2, got ", num_classes);
  }
  if (need_hidden && hidden.empty()) {
    return "mlp needs at least one hidden layer width, got none";
  }
  for (int h : hidden) {
    if (h < 1) {
      return absl::StrCat("hidden layer widths must be >= 1, got [", absl::StrJoin(hidden, ","),
                          "]");
    }
  }
  return "";
}

std::vector<int> Widths(int dim, const std::vector<int>& hidden, int num_classes) {
  std::vector<int> widths = {dim};
  widths.insert(widths.end(), hidden.begin(), hidden.end());
  widths.push_back(num_classes);
  return widths;
}

}  // namespace

int64_t Model::num_params() const {
  int64_t total = 0;
  for (const ParamBlock& b : blocks()) total += b.size;
  return total;
}

std::unique_ptr<Model> MakeSoftmaxRegression(int dim, int num_classes) {
  const std::string problem = ShapeProblem(dim, {}, num_classes, false);
  Require(problem.empty(), problem);
  return std::make_unique<FeedForwardNet>("softmax", Widths(dim, {}, num_classes));
}

std::unique_ptr<Model> MakeMlp(int dim, std::vector<int> hidden, int num_classes) {
  const std::string problem = ShapeProblem(dim, hidden, num_classes, true);
  Require(problem.empty(), problem);
  return std::make_unique<FeedForwardNet>("mlp", Widths(dim, hidden, num_classes));
}

absl::StatusOr<std::unique_ptr<Model>> MakeModel(const std::string& kind, int dim,
                                                 std::vector<int> hidden, int num_classes) {
  if (kind != "softmax" && kind != "mlp") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown model kind '", kind, "'; expected 'softmax' or 'mlp'"));
  }
  const bool mlp = kind == "mlp";
  const std::string problem =
      ShapeProblem(dim, mlp ? hidden : std::vector<int>(), num_classes, mlp);
  if (!problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("model '", kind, "': ", problem));
  }
  if (mlp) return MakeMlp(dim, std::move(hidden), num_classes);
  return MakeSoftmaxRegression(dim, num_classes);
}

std::vector<float> InitialParams(const Model& m, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::vector<float> params;
  params.reserve(m.num_params());
  for (const ParamBlock& b : m.blocks()) {
    for (int64_t i = 0; i < b.size; ++i) {
      if (b.init_bound == 0.0f) {
        params.push_back(0.0f);
        continue;
      }
      // 24 random bits -> u in [0, 1); value in [-bound, bound).
      const float u = static_cast<float>(engine() >> 40) * 0x1.0p-24f;
      params.push_back(b.init_bound * (2.0f * u - 1.0f));
    }
  }
  return params;
}

double Accuracy(const Model& m, absl::Span<const float> params, const Dataset& data) {
  Require(data.dim == m.input_dim(), "data set has dim ", data.dim, ", model ", m.name(),
          " expects ", m.input_dim());
  if (data.num_examples == 0) return 0.0;
  constexpr int kBatch = 256;
  std::vector<int32_t> predicted(kBatch);
  int64_t correct = 0;
  for (int64_t start = 0; start < data.num_examples; start += kBatch) {
    const int n = static_cast<int>(std::min<int64_t>(kBatch, data.num_examples - start));
    m.Predict(params, data.row(start), n, predicted.data());
    for (int i = 0; i < n; ++i) {
      correct += predicted[i] == data.labels[start + i];
    }
  }
  return static_cast<double>(correct) / data.num_examples;
}

}  // namespace ps
