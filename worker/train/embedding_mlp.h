// Embedding + MLP for click-through prediction on a parameter server: each
// feature id has an embedding row (width `dim`) in a sparse table; an
// example's rows, weighted by the feature values, are summed per field (the
// F = num_fields sums of width dim, concatenated, are the MLP's F * dim
// inputs), and an MLP with one ReLU hidden layer maps them to a click
// probability. Fields come from field:index:value lines (libffm, see
// worker/train/libsvm_reader.h); a plain index:value feature is in field 0,
// so F = 1 sums every feature into one vector. The rows of all fields share
// the one sparse table (the feature ids are global). The MLP's weights are
// dense tables. Each step a worker pulls the minibatch's embedding rows and
// the MLP, back-propagates the log-loss, and pushes the rows' gradients and
// the MLP's (summed over the batch), asynchronously, stamped with the step.
// Not thread-safe: one training or evaluation call per client at a time.
#ifndef PS_WORKER_TRAIN_EMBEDDING_MLP_H_
#define PS_WORKER_TRAIN_EMBEDDING_MLP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ps.pb.h"
#include "worker/client/ps_client.h"
#include "worker/train/sparse_trainer.h"

namespace ps {

struct EmbeddingMlpConfig {
  std::string prefix = "embedding_mlp";
  uint32_t dim = 8;      // embedding width
  uint32_t hidden = 16;  // units of the hidden layer
  // Fields F, in [1, kMaxLibsvmField + 1]: an example's features of field f
  // are summed into inputs [f * dim, (f + 1) * dim). A feature of field >= F
  // is an error (every worker and the evaluation must agree on F).
  uint32_t num_fields = 1;
  uint32_t num_buckets = 1024;
  uint64_t seed = 1;
  // > 0: the sparse table is tiered (storage STORAGE_TIERED): its rows on
  // the servers' disks, this many MiB of them in each server's memory.
  uint64_t tiered_cache_mb = 0;
};

// The tables: "<prefix>/emb" (sparse, width dim, uniform in +-0.05), and
// the dense "<prefix>/w1" (num_fields * dim x hidden, row-major by hidden
// unit: w1[u * num_fields * dim + f * dim + k] weighs component k of field
// f's sum into unit u), "/b1",
// "/w2" (hidden), "/b2" (1), Xavier-uniform weights and zero biases; each
// with the optimizer fields of `optimizer`.
std::vector<proto::TableDef> EmbeddingMlpTables(const EmbeddingMlpConfig& model,
                                                const proto::TableDef& optimizer);

// Trains as TrainSparseLr does (same config fields, the row cache and the
// filter included, for the embedding rows). Errors: INVALID_ARGUMENT when
// num_fields is out of range, or for a feature whose field is >= num_fields
// ("PATH:LINE: ..."); the reader's and the client's.
absl::StatusOr<SparseTrainStats> TrainEmbeddingMlp(
    PsClient& client, const std::string& train_path, const SparseTrainerConfig& config,
    const EmbeddingMlpConfig& model, const std::function<void(const std::string&)>& progress);

// The current model's AUC, accuracy and log-loss on `test_path`. Errors:
// those of TrainEmbeddingMlp, but for test_path.
absl::StatusOr<SparseEvaluation> EvaluateEmbeddingMlp(PsClient& client,
                                                      const std::string& test_path,
                                                      const EmbeddingMlpConfig& model,
                                                      int batch_size);

}  // namespace ps

#endif  // PS_WORKER_TRAIN_EMBEDDING_MLP_H_
