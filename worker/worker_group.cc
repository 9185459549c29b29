#include "worker/worker_group.h"

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

// A flag left at its default takes the world's value; another must agree.
absl::Status Agree(const char* flag, int* value, int default_value, int world_value,
                   const Collective& world) {
  if (*value != default_value && *value != world_value) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", *value, " but this process is rank ", world.rank(), " of ",
                     world.size(), " started by mpirun/srun, which makes it ", world_value,
                     " (leave the flag out, or launch another number of processes)"));
  }
  *value = world_value;
  return absl::OkStatus();
}

}  // namespace

bool NeedsWorkerGroups(const WorkerConfig& config) {
  // Partitions evaluate together too; an allreduce job's evaluation reads
  // the servers alone.
  return config.model_partitions > 1 || (config.dense_allreduce && !config.eval_only);
}

absl::Status JoinWorkerGroups(WorkerConfig* config, WorkerGroups* groups) {
  Collective& world = *groups->world;
  const int k = config->model_partitions;
  if (k < 1 || world.size() % k != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model_partitions=", k, ": the job has ", world.size(),
                     " processes, not a multiple of it (each replica is ", k, " processes)"));
  }
  const int rank = world.rank();
  if (absl::Status s = Agree("--worker_index", &config->trainer.worker_index, 0, rank / k, world);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          Agree("--num_workers", &config->trainer.num_workers, 1, world.size() / k, world);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Agree("--partition", &config->partition, 0, rank % k, world); !s.ok()) {
    return s;
  }
  if (k == 1) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<Collective>> replica = world.Split(rank / k, rank % k);
  if (!replica.ok()) return replica.status();
  groups->replica = *std::move(replica);
  return absl::OkStatus();
}

}  // namespace ps
