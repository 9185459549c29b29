#include "worker/train/synthetic_data.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace ps {
namespace {

constexpr float kMargin = 0.5f;
constexpr float kClassShift = 2.0f;
constexpr double kTwoPi = 6.283185307179586;

// Standard normal samples via Box-Muller on top of mt19937_64, whose output
// sequence is fixed by the C++ standard (unlike std::normal_distribution's),
// so data sets are identical across standard libraries.
class Gaussian {
 public:
  explicit Gaussian(uint64_t seed) : engine_(seed) {}

  float Next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = Uniform01Open();
    const double u2 = Uniform01Open();
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = kTwoPi * u2;
    spare_ = static_cast<float>(r * std::sin(theta));
    has_spare_ = true;
    return static_cast<float>(r * std::cos(theta));
  }

  // Uniform integer in [0, n).
  int UniformInt(int n) { return static_cast<int>(engine_() % static_cast<uint64_t>(n)); }

 private:
  // Uniform in (0, 1]: 53 random bits, shifted off zero.
  double Uniform01Open() { return (static_cast<double>(engine_() >> 11) + 1.0) * 0x1.0p-53; }

  std::mt19937_64 engine_;
  bool has_spare_ = false;
  float spare_ = 0;
};

}  // namespace

LinearProblem MakeLinearProblem(int64_t n, int dim, int num_classes, uint64_t seed) {
  if (n < 0 || dim < 1 || num_classes < 2) {
    std::fprintf(stderr,
                 "MakeLinearProblem: need n >= 0, dim >= 1, num_classes >= 2; "
                 "got n=%lld dim=%d num_classes=%d\n",
                 static_cast<long long>(n), dim, num_classes);
    std::abort();
  }
  Gaussian rng(seed);
  LinearProblem p;
  p.margin = kMargin;
  p.weights.resize(static_cast<size_t>(num_classes) * dim);
  for (int k = 0; k < num_classes; ++k) {
    float* w = &p.weights[static_cast<size_t>(k) * dim];
    double norm2 = 0;
    for (int j = 0; j < dim; ++j) {
      w[j] = rng.Next();
      norm2 += static_cast<double>(w[j]) * w[j];
    }
    const float inv = static_cast<float>(1.0 / std::sqrt(norm2));
    for (int j = 0; j < dim; ++j) w[j] *= inv;
  }

  Dataset& d = p.data;
  d.num_examples = n;
  d.dim = dim;
  d.num_classes = num_classes;
  d.features.resize(static_cast<size_t>(n) * dim);
  d.labels.resize(n);
  std::vector<float> scores(num_classes);
  for (int64_t i = 0; i < n; ++i) {
    float* x = &d.features[static_cast<size_t>(i) * dim];
    for (;;) {
      const float* wc = &p.weights[static_cast<size_t>(rng.UniformInt(num_classes)) * dim];
      for (int j = 0; j < dim; ++j) x[j] = rng.Next() + kClassShift * wc[j];
      int best = 0;
      for (int k = 0; k < num_classes; ++k) {
        const float* w = &p.weights[static_cast<size_t>(k) * dim];
        float s = 0;
        for (int j = 0; j < dim; ++j) s += w[j] * x[j];
        scores[k] = s;
        if (s > scores[best]) best = k;
      }
      float runner_up = -INFINITY;
      for (int k = 0; k < num_classes; ++k) {
        if (k != best) runner_up = std::max(runner_up, scores[k]);
      }
      if (scores[best] - runner_up >= kMargin) {
        d.labels[i] = best;
        break;
      }
    }
  }
  return p;
}

Dataset MakeLinearlySeparable(int64_t n, int dim, int num_classes, uint64_t seed) {
  return MakeLinearProblem(n, dim, num_classes, seed).data;
}

Dataset MakeQuadrantImages(int64_t n, int rows, int cols, uint64_t seed) {
  if (n < 0 || rows < 2 || cols < 2) {
    std::fprintf(stderr,
                 "MakeQuadrantImages: need n >= 0, rows >= 2, cols >= 2; "
                 "got n=%lld rows=%d cols=%d\n",
                 static_cast<long long>(n), rows, cols);
    std::abort();
  }
  constexpr int kClasses = 4;
  std::mt19937_64 engine(seed);
  // Uniform integer in [lo, hi].
  auto uniform = [&engine](int lo, int hi) {
    return lo + static_cast<int>(engine() % static_cast<uint64_t>(hi - lo + 1));
  };
  Dataset d;
  d.num_examples = n;
  d.dim = rows * cols;
  d.num_classes = kClasses;
  d.features.reserve(static_cast<size_t>(n) * d.dim);
  d.labels.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    const int label = uniform(0, kClasses - 1);
    d.labels.push_back(label);
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c) {
        const int quadrant = (r < rows / 2 ? 0 : 2) + (c < cols / 2 ? 0 : 1);
        const int byte = quadrant == label ? uniform(160, 255) : uniform(0, 96);
        d.features.push_back(static_cast<float>(byte) * (1.0f / 255.0f));
      }
    }
  }
  return d;
}

}  // namespace ps
