// The embedding MLP's arithmetic (worker/train/embedding_mlp.h), for one
// example at a time, over a share of the hidden units: all of them (a whole
// worker), or a model partition's [first, first + hidden) (issue 30's
// --model_partitions, where the partitions' logits and input gradients are
// summed by the caller). Internal to the embedding MLP's trainer.
#ifndef PS_WORKER_TRAIN_EMBEDDING_MLP_MATH_H_
#define PS_WORKER_TRAIN_EMBEDDING_MLP_MATH_H_

#include <cstdint>
#include <vector>

#include "worker/train/embedding_mlp.h"
#include "worker/train/libsvm_reader.h"

namespace ps {

// The MLP's parameters for hidden units [first, first + hidden):
// w1[u * in + i] weighs input i (component i % dim of field i / dim's sum)
// into the share's unit u; b2 counts only in the share that has the first
// unit (owns_b2).
struct Mlp {
  uint32_t dim = 0, in = 0, first = 0, hidden = 0;
  std::vector<float> w1, b1, w2, b2;

  // The whole MLP, or units [first, first + count).
  explicit Mlp(const EmbeddingMlpConfig& model) : Mlp(model, 0, model.hidden) {}
  Mlp(const EmbeddingMlpConfig& model, uint32_t first_unit, uint32_t count);
  bool owns_b2() const { return first == 0; }
  void Zero();
};

// Example `ex`'s per-field sums of its rows (rows[index[j] * dim ...] for
// feature j), weighted by the feature values, into e[0, in). Its fields are
// < num_fields.
void EmbedSums(const SparseExample& ex, const std::vector<uint32_t>& index, const float* rows,
               uint32_t dim, uint32_t in, float* e);

// The share's part of the logit for inputs e: sum over its units of
// w2[u] * relu(b1[u] + w1[u] . e), plus b2 when it owns it. Writes the
// units' pre-activations `a` and activations `h`.
double HiddenShare(const Mlp& mlp, const float* e, std::vector<float>* a, std::vector<float>* h);

// Back-propagation through the share for an example whose dL/dz is g
// (inputs e, and HiddenShare's a and h): adds the share's parameter
// gradients into *grad and its part of dL/de into de[0, in).
void BackShare(const Mlp& mlp, const float* e, const std::vector<float>& a,
               const std::vector<float>& h, float g, Mlp* grad, float* de);

// A feature's row gets its field's share of dL/de (de[0, in)): adds into
// row_grads (rows by index, as EmbedSums reads them).
void AddRowGrads(const SparseExample& ex, const std::vector<uint32_t>& index, const float* de,
                 uint32_t dim, float* row_grads);

}  // namespace ps

#endif  // PS_WORKER_TRAIN_EMBEDDING_MLP_MATH_H_
