// MpiCollective: a Collective over an MPI communicator (Open MPI), for
// processes started by mpirun or srun. Start() initializes MPI once per
// process, over MPI_COMM_WORLD, and makes errors return (MPI_ERRORS_RETURN)
// instead of aborting, so a failed operation becomes this member's error;
// its destructor finalizes MPI. Split() makes sub-communicators
// (MPI_Comm_split), freed by their destructors. When a member dies, mpirun
// (and srun) end the others: a job fails, it does not hang. Used by one
// thread at a time.
//
// Built without Open MPI (libopenmpi-dev was not installed when Bazel read
// the system libraries: third_party/system_libs.bzl defines PS_NO_MPI),
// Start() fails saying how to get it; nothing else is reachable then.
#ifndef PS_WORKER_COLLECTIVE_MPI_COLLECTIVE_H_
#define PS_WORKER_COLLECTIVE_MPI_COLLECTIVE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/collective/collective.h"

namespace ps {

class MpiCollective final : public Collective {
 public:
  // MPI_Init_thread (funneled) on the process's arguments. Errors:
  // FAILED_PRECONDITION when MPI was started already or could not start
  // (naming MPI's message: is the process under mpirun or srun?).
  static absl::StatusOr<std::unique_ptr<MpiCollective>> Start(int* argc, char*** argv);
  ~MpiCollective() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // Errors: INVALID_ARGUMENT for more than INT_MAX values or a bad root or
  // out size; INTERNAL with MPI's message when the operation failed.
  absl::Status AllreduceSum(absl::Span<float> data) override;
  absl::Status Allgather(absl::Span<const float> in, absl::Span<float> out) override;
  absl::Status Broadcast(absl::Span<float> data, int root) override;
  // Errors: INVALID_ARGUMENT for a negative color; INTERNAL with MPI's message.
  absl::StatusOr<std::unique_ptr<Collective>> Split(int color, int key) override;

  // Ends every process of the job (MPI_Abort on the world) with `code`:
  // a process that failed calls it rather than finalizing, which would
  // wait for the others, themselves waiting in a collective for it.
  [[noreturn]] static void AbortJob(int code);

 private:
  struct Comm;  // MPI_Comm, whose type only mpi_collective.cc sees
  // `world`: the communicator of Start (finalizes MPI when destroyed), else
  // a split one (freed when destroyed).
  MpiCollective(std::unique_ptr<Comm> comm, bool world);
  std::unique_ptr<Comm> comm_;
  const bool world_;
  int rank_ = 0;
  int size_ = 0;
};

}  // namespace ps

#endif  // PS_WORKER_COLLECTIVE_MPI_COLLECTIVE_H_
