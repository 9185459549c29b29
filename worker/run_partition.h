// ps_worker --model_partitions (worker/train/partitioned_mlp.h): one
// partition of a model replica, and the memory limit every dense run
// checks. Internal to //worker.
#ifndef PS_WORKER_RUN_PARTITION_H_
#define PS_WORKER_RUN_PARTITION_H_

#include <vector>

#include "absl/status/status.h"
#include "worker/run_worker.h"
#include "worker/train/idx_reader.h"
#include "worker/train/model.h"
#include "worker/worker_config.h"

namespace ps {

// The widths {dim, hidden..., classes} of the MLP on `data`.
std::vector<int> MlpWidths(const WorkerConfig& config, const TrainTestData& data);

// --max_worker_memory_mb: the parameters this process would hold (each
// value and its gradient, 8 bytes) against the limit. RESOURCE_EXHAUSTED
// naming the flag, the sizes and about how many partitions would fit.
absl::Status CheckWorkerMemory(const WorkerConfig& config, const Model& model,
                               const std::vector<int>& widths);

// One partition of a replica: trains with the others of config's replica
// (env.partitions), then replica 0's partitions evaluate together.
absl::Status RunPartition(const WorkerConfig& config, const WorkerEnv& env, const Model& model,
                          const TrainTestData& data, const std::vector<int>& widths);

}  // namespace ps

#endif  // PS_WORKER_RUN_PARTITION_H_
