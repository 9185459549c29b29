// The groups a ps_worker takes part in besides the parameter servers
// (issue 30), made from the processes mpirun or srun started (the world):
// all the job's workers (--dense_sync=allreduce), and the partitions of
// this process's model replica (--model_partitions). World rank r is
// replica r / K, partition r % K.
#ifndef PS_WORKER_WORKER_GROUP_H_
#define PS_WORKER_WORKER_GROUP_H_

#include <memory>

#include "absl/status/status.h"
#include "worker/collective/collective.h"
#include "worker/worker_config.h"

namespace ps {

struct WorkerGroups {
  // Declared first, destroyed last (the others are split from it).
  std::unique_ptr<Collective> world;
  // The partitions of this replica, ranked by partition (model_partitions > 1).
  std::unique_ptr<Collective> replica;
};

// Whether the config needs the groups (--model_partitions > 1, or training
// with --dense_sync=allreduce).
bool NeedsWorkerGroups(const WorkerConfig& config);

// From the world's rank and size: sets config's replica (trainer.worker_index,
// trainer.num_workers) and partition, and makes groups->replica. Errors:
// INVALID_ARGUMENT when the world's size is not a multiple of
// model_partitions, or when --worker_index, --num_workers or --partition
// were given other values than the world's (naming the flag, the value and
// the world's); Split's.
absl::Status JoinWorkerGroups(WorkerConfig* config, WorkerGroups* groups);

}  // namespace ps

#endif  // PS_WORKER_WORKER_GROUP_H_
