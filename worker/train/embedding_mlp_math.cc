#include "worker/train/embedding_mlp_math.h"

#include <algorithm>

namespace ps {

Mlp::Mlp(const EmbeddingMlpConfig& model, uint32_t first_unit, uint32_t count)
    : dim(model.dim),
      in(model.num_fields * model.dim),
      first(first_unit),
      hidden(count),
      w1(static_cast<size_t>(in) * count),
      b1(count),
      w2(count),
      b2(1) {}

void Mlp::Zero() {
  std::fill(w1.begin(), w1.end(), 0.0f);
  std::fill(b1.begin(), b1.end(), 0.0f);
  std::fill(w2.begin(), w2.end(), 0.0f);
  b2[0] = 0;
}

void EmbedSums(const SparseExample& ex, const std::vector<uint32_t>& index, const float* rows,
               uint32_t dim, uint32_t in, float* e) {
  std::fill(e, e + in, 0.0f);
  for (size_t j = 0; j < ex.values.size(); ++j) {
    const float* row = rows + static_cast<size_t>(index[j]) * dim;
    float* sum = e + static_cast<size_t>(ex.field(j)) * dim;
    for (uint32_t k = 0; k < dim; ++k) sum[k] += ex.values[j] * row[k];
  }
}

double HiddenShare(const Mlp& mlp, const float* e, std::vector<float>* a, std::vector<float>* h) {
  const uint32_t in = mlp.in, H = mlp.hidden;
  a->resize(H);
  h->resize(H);
  double z = mlp.owns_b2() ? mlp.b2[0] : 0.0;
  for (uint32_t u = 0; u < H; ++u) {
    float s = mlp.b1[u];
    const float* w = mlp.w1.data() + static_cast<size_t>(u) * in;
    for (uint32_t i = 0; i < in; ++i) s += w[i] * e[i];
    (*a)[u] = s;
    (*h)[u] = std::max(s, 0.0f);
    z += mlp.w2[u] * (*h)[u];
  }
  return z;
}

void BackShare(const Mlp& mlp, const float* e, const std::vector<float>& a,
               const std::vector<float>& h, float g, Mlp* grad, float* de) {
  const uint32_t in = mlp.in;
  if (mlp.owns_b2()) grad->b2[0] += g;
  for (uint32_t u = 0; u < mlp.hidden; ++u) {
    grad->w2[u] += g * h[u];
    if (a[u] <= 0) continue;  // ReLU: no gradient below zero
    const float da = g * mlp.w2[u];
    grad->b1[u] += da;
    const size_t row = static_cast<size_t>(u) * in;
    for (uint32_t i = 0; i < in; ++i) {
      grad->w1[row + i] += da * e[i];
      de[i] += da * mlp.w1[row + i];
    }
  }
}

void AddRowGrads(const SparseExample& ex, const std::vector<uint32_t>& index, const float* de,
                 uint32_t dim, float* row_grads) {
  for (size_t j = 0; j < ex.values.size(); ++j) {
    float* rg = row_grads + static_cast<size_t>(index[j]) * dim;
    const float* df = de + static_cast<size_t>(ex.field(j)) * dim;
    for (uint32_t k = 0; k < dim; ++k) rg[k] += ex.values[j] * df[k];
  }
}

}  // namespace ps
