#include "worker/train/model.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/train/synthetic_data.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> labels;
};

Batch RandomBatch(int batch, int dim, int num_classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> feature(-1.0f, 1.0f);
  Batch b;
  for (int i = 0; i < batch * dim; ++i) b.x.push_back(feature(rng));
  for (int i = 0; i < batch; ++i) b.labels.push_back(rng() % num_classes);
  return b;
}

// Compares the analytic gradient with central finite differences for every
// parameter, starting from Glorot-initialized params with small random biases
// (so that bias gradients are exercised away from zero).
void CheckGradient(const Model& m, int dim, int num_classes) {
  const int kBatch = 4;
  const Batch b = RandomBatch(kBatch, dim, num_classes, /*seed=*/11);
  std::vector<float> params = InitialParams(m, /*seed=*/5);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> small(-0.1f, 0.1f);
  for (float& p : params) {
    if (p == 0.0f) p = small(rng);
  }

  std::vector<float> grad(m.num_params());
  m.LossAndGradient(params, b.x.data(), b.labels.data(), kBatch, absl::MakeSpan(grad));
  std::vector<float> scratch(m.num_params());
  auto loss_at = [&](const std::vector<float>& p) {
    return static_cast<double>(
        m.LossAndGradient(p, b.x.data(), b.labels.data(), kBatch, absl::MakeSpan(scratch)));
  };

  const float kEps = 1e-2f;
  for (int64_t i = 0; i < m.num_params(); ++i) {
    std::vector<float> plus = params, minus = params;
    plus[i] += kEps;
    minus[i] -= kEps;
    const double numeric = (loss_at(plus) - loss_at(minus)) / (double{plus[i]} - minus[i]);
    const double analytic = grad[i];
    const double abs_err = std::abs(numeric - analytic);
    const double rel_err = abs_err / std::max(std::abs(numeric), std::abs(analytic));
    EXPECT_TRUE(abs_err < 1e-3 || rel_err < 2e-2)
        << m.name() << " param " << i << ": analytic " << analytic << " numeric " << numeric;
  }
}

TEST(ModelTest, SoftmaxBlocks) {
  std::unique_ptr<Model> m = MakeSoftmaxRegression(784, 10);
  EXPECT_EQ(m->name(), "softmax");
  EXPECT_EQ(m->input_dim(), 784);
  EXPECT_EQ(m->num_classes(), 10);
  ASSERT_EQ(m->blocks().size(), 2u);
  EXPECT_EQ(m->blocks()[0].name, "fc0/w");
  EXPECT_EQ(m->blocks()[0].size, 7840);
  EXPECT_FLOAT_EQ(m->blocks()[0].init_bound, std::sqrt(6.0f / 794));
  EXPECT_EQ(m->blocks()[1].name, "fc0/b");
  EXPECT_EQ(m->blocks()[1].size, 10);
  EXPECT_EQ(m->blocks()[1].init_bound, 0.0f);
  EXPECT_EQ(m->num_params(), 7850);
}

TEST(ModelTest, MlpBlocks) {
  std::unique_ptr<Model> m = MakeMlp(784, {256, 128}, 10);
  EXPECT_EQ(m->name(), "mlp");
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  for (const ParamBlock& b : m->blocks()) {
    names.push_back(b.name);
    sizes.push_back(b.size);
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"fc0/w", "fc0/b", "fc1/w", "fc1/b", "fc2/w", "fc2/b"}));
  EXPECT_EQ(sizes, (std::vector<int64_t>{784 * 256, 256, 256 * 128, 128, 1280, 10}));
  EXPECT_EQ(m->num_params(), 784 * 256 + 256 + 256 * 128 + 128 + 1280 + 10);
  EXPECT_FLOAT_EQ(m->blocks()[2].init_bound, std::sqrt(6.0f / 384));
}

TEST(ModelTest, SoftmaxGradientMatchesFiniteDifferences) {
  CheckGradient(*MakeSoftmaxRegression(5, 3), 5, 3);
}

TEST(ModelTest, MlpOneHiddenGradientMatchesFiniteDifferences) {
  CheckGradient(*MakeMlp(5, {4}, 3), 5, 3);
}

TEST(ModelTest, MlpTwoHiddenGradientMatchesFiniteDifferences) {
  CheckGradient(*MakeMlp(5, {4, 3}, 3), 5, 3);
}

TEST(ModelTest, ZeroParamsGiveLogNumClasses) {
  std::unique_ptr<Model> m = MakeSoftmaxRegression(6, 7);
  const Batch b = RandomBatch(5, 6, 7, /*seed=*/2);
  std::vector<float> params(m->num_params(), 0.0f);
  std::vector<float> grad(m->num_params(), 123.0f);
  const float loss =
      m->LossAndGradient(params, b.x.data(), b.labels.data(), 5, absl::MakeSpan(grad));
  EXPECT_NEAR(loss, std::log(7.0f), 1e-6);
  // Bias gradient at zero params: mean over rows of (1/7 - onehot).
  std::vector<int> count(7, 0);
  for (int32_t y : b.labels) ++count[y];
  for (int c = 0; c < 7; ++c) {
    EXPECT_NEAR(grad[6 * 7 + c], 1.0f / 7 - count[c] / 5.0f, 1e-6);
  }
}

TEST(ModelTest, EmptyBatchGivesZeroLossAndGradient) {
  std::unique_ptr<Model> m = MakeMlp(3, {2}, 2);
  std::vector<float> params = InitialParams(*m, 1);
  std::vector<float> grad(m->num_params(), 9.0f);
  EXPECT_EQ(m->LossAndGradient(params, nullptr, nullptr, 0, absl::MakeSpan(grad)), 0.0f);
  for (float g : grad) EXPECT_EQ(g, 0.0f);
}

TEST(ModelTest, PredictIsArgmaxOfLinearScores) {
  // 2 inputs, 3 classes; w = identity-like so class = argmax(x0, x1, 0.5).
  std::unique_ptr<Model> m = MakeSoftmaxRegression(2, 3);
  // fc0/w row-major 2x3, then fc0/b.
  std::vector<float> params = {1, 0, 0,  //
                               0, 1, 0,  //
                               0, 0, 0.5f};
  std::vector<float> x = {2, 1, 0, 3, 0.1f, 0.2f};
  int32_t out[3];
  m->Predict(params, x.data(), 3, out);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[1], 1);
  EXPECT_EQ(out[2], 2);
}

TEST(ModelTest, InitialParamsRespectBounds) {
  std::unique_ptr<Model> m = MakeMlp(20, {10}, 4);
  std::vector<float> p = InitialParams(*m, 9);
  ASSERT_EQ(static_cast<int64_t>(p.size()), m->num_params());
  EXPECT_EQ(p, InitialParams(*m, 9));
  int64_t offset = 0;
  for (const ParamBlock& b : m->blocks()) {
    for (int64_t i = 0; i < b.size; ++i) {
      const float v = p[offset + i];
      if (b.init_bound == 0.0f) {
        EXPECT_EQ(v, 0.0f) << b.name;
      } else {
        EXPECT_LE(std::abs(v), b.init_bound) << b.name;
      }
    }
    offset += b.size;
  }
}

// Plain minibatch SGD; returns training accuracy.
double TrainSgd(const Model& m, const Dataset& d, int steps, int batch, float lr) {
  std::vector<float> params = InitialParams(m, /*seed=*/1);
  std::vector<float> grad(m.num_params());
  int64_t next = 0;
  for (int step = 0; step < steps; ++step) {
    if (next + batch > d.num_examples) next = 0;
    m.LossAndGradient(params, d.row(next), &d.labels[next], batch, absl::MakeSpan(grad));
    for (size_t i = 0; i < params.size(); ++i) params[i] -= lr * grad[i];
    next += batch;
  }
  return Accuracy(m, params, d);
}

TEST(ModelTest, SoftmaxLearnsLinearlySeparableData) {
  const Dataset d = MakeLinearlySeparable(2000, 20, 5, /*seed=*/4);
  std::unique_ptr<Model> m = MakeSoftmaxRegression(20, 5);
  std::vector<float> zero(m->num_params(), 0.0f);
  EXPECT_LT(Accuracy(*m, zero, d), 0.5);
  EXPECT_GT(TrainSgd(*m, d, /*steps=*/300, /*batch=*/32, /*lr=*/0.5f), 0.95);
}

TEST(ModelTest, MlpLearnsLinearlySeparableData) {
  const Dataset d = MakeLinearlySeparable(2000, 20, 5, /*seed=*/4);
  std::unique_ptr<Model> m = MakeMlp(20, {32, 16}, 5);
  EXPECT_GT(TrainSgd(*m, d, /*steps=*/600, /*batch=*/32, /*lr=*/0.2f), 0.95);
}

TEST(ModelTest, MakeModelParsesKinds) {
  absl::StatusOr<std::unique_ptr<Model>> softmax = MakeModel("softmax", 8, {100}, 3);
  ASSERT_TRUE(softmax.ok()) << softmax.status();
  EXPECT_EQ((*softmax)->name(), "softmax");
  EXPECT_EQ((*softmax)->num_params(), 8 * 3 + 3);
  absl::StatusOr<std::unique_ptr<Model>> mlp = MakeModel("mlp", 8, {4}, 3);
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  EXPECT_EQ((*mlp)->name(), "mlp");
  EXPECT_EQ((*mlp)->num_params(), 8 * 4 + 4 + 4 * 3 + 3);
}

TEST(ModelTest, MakeModelRejectsUnknownKind) {
  absl::StatusOr<std::unique_ptr<Model>> m = MakeModel("cnn", 8, {4}, 3);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("'cnn'"));
}

TEST(ModelTest, MakeModelRejectsBadShapes) {
  EXPECT_EQ(MakeModel("mlp", 8, {}, 3).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<Model>> m = MakeModel("mlp", 8, {4, 0}, 3);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("[4,0]"));
  EXPECT_EQ(MakeModel("softmax", 0, {}, 3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeModel("softmax", 8, {}, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
