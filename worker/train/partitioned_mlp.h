// Model parallelism inside a replica (DistBelief's partitions, Mesh-
// TensorFlow's split of a named dimension; issue 30): the MLP of
// worker/train/model.h split over K processes by hidden units. Partition P
// owns units [P*n/K, (P+1)*n/K) of every hidden layer of n units, and of
// the output layer's classes likewise (K <= every width):
//
//   into hidden layer l+1   the columns of "fc<l>/w" for its units (every
//                           input row, a run of keys per row) and its
//                           units' entries of "fc<l>/b";
//   into the output         the rows of the last "fc<L>/w" for its units of
//                           the last hidden layer (one run of keys), and
//                           its classes' entries of "fc<L>/b".
//
// So each partition pulls and pushes 1/K of every table, the same tables a
// whole worker uses (a checkpoint, an evaluation or another K reads them
// alike). A step, on the same minibatch in every partition of the replica:
//
//   forward   each hidden layer: its units' activations from the full
//             input, then an Allgather makes the next full input; the
//             last hidden layer's units give partial logits (plus its
//             classes' biases), summed by an AllreduceSum;
//   backward  the softmax's gradient is the same everywhere; each layer's
//             gradient for the partition's weights is local, and the
//             gradient of a layer's full input is an AllreduceSum of the
//             partitions' shares, of which each keeps its units' columns.
//
// The arithmetic is the whole model's (worker/train/model.cc) with sums
// split by partition, so K = 2 or 4 gives the parameters of K = 1 up to
// float rounding. Not thread-safe.
#ifndef PS_WORKER_TRAIN_PARTITIONED_MLP_H_
#define PS_WORKER_TRAIN_PARTITIONED_MLP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/client/param_client.h"
#include "worker/collective/collective.h"
#include "worker/train/dataset.h"
#include "worker/train/trainer.h"

namespace ps {

// Which units of each layer a partition owns.
struct MlpPartition {
  // widths = {dim, hidden..., num_classes}; 1 <= partitions <= every width
  // but dim; 0 <= partition < partitions. Errors: INVALID_ARGUMENT naming
  // the layer too narrow for the partitions, or the bad partition.
  static absl::StatusOr<MlpPartition> Make(std::vector<int> widths, int partitions, int partition);

  std::vector<int> widths;
  int partitions = 1;
  int partition = 0;

  // Weight layers (fc0 .. fc<L>), L + 1 of them.
  int num_layers() const { return static_cast<int>(widths.size()) - 1; }
  // The units of layer j (1 .. num_layers(); the last is the classes) that
  // partition p owns: [First(j, p), First(j, p + 1)).
  int First(int j, int p) const;
  int First(int j) const { return First(j, partition); }
  int Count(int j) const { return First(j, partition + 1) - First(j, partition); }
  int MaxCount(int j) const;  // over the partitions

  // Parameters this partition holds, and the whole model's.
  int64_t ParamsHeld() const;
  int64_t ParamsTotal() const;
};

struct PartitionedTrainStats {
  int64_t steps = 0;
  int64_t examples = 0;
  double seconds = 0;
  double examples_per_second = 0;
  double mean_loss_last_epoch = 0;
  int64_t params_held = 0;    // MlpPartition::ParamsHeld
  int64_t values_pulled = 0;  // summed over steps
  int64_t values_pushed = 0;
  // Floats this partition handed to the collectives (activations forward,
  // their gradients backward), summed over steps.
  int64_t activation_values = 0;
};

// Trains partition `group->rank()` of `group->size()` of one replica on
// `shard` (the replica's examples: every partition of the replica gets the
// same shard and config, so the same minibatches), through `client`, with
// tables "<config.table_prefix>/fc<l>/{w,b}" (ModelTables of the MLP).
// Pulls at the round's clock and pushes at it (n_fetch = n_push = 1; the
// servers' consistency applies). `progress` gets a line every
// config.progress_interval. Errors: the client's and the group's (naming
// the step); INVALID_ARGUMENT for a layer too narrow, or a shard whose
// dimension is not widths[0].
absl::StatusOr<PartitionedTrainStats> TrainPartitionedMlp(
    ParamClient& client, const std::vector<int>& widths, const Dataset& shard,
    const TrainerConfig& config, Collective* group,
    const std::function<void(const std::string&)>& progress);

// The fraction of `test` the model on the servers classifies right,
// computed by the partitions together (each pulls only its share; every
// partition gets the result). Errors: those of TrainPartitionedMlp.
absl::StatusOr<double> PartitionedMlpAccuracy(ParamClient& client, const std::vector<int>& widths,
                                              const Dataset& test, const std::string& table_prefix,
                                              Collective* group);

}  // namespace ps

#endif  // PS_WORKER_TRAIN_PARTITIONED_MLP_H_
