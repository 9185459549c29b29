// Collective: the group operations of the members of one job that train
// together outside the parameter servers (issue 30): an allreduce for dense
// layers synchronized among workers (--dense_sync=allreduce), the allgather
// and reduction between the partitions of one model replica
// (--model_partitions). Every member calls the same operations in the same
// order with buffers of the same sizes; a call returns when the group's
// result is in its buffer, or with an error for this member (the group is
// then broken: no further call may be made). One object per member, used by
// one thread at a time.
//
// Implementations: LocalCollective (threads of one process; tests) and
// MpiCollective (processes under mpirun or srun).
#ifndef PS_WORKER_COLLECTIVE_COLLECTIVE_H_
#define PS_WORKER_COLLECTIVE_COLLECTIVE_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ps {

class Collective {
 public:
  virtual ~Collective() = default;

  virtual int rank() const = 0;  // 0 .. size() - 1
  virtual int size() const = 0;

  // data <- the element-wise sum of every member's data (same length on
  // every member). Members get the same bits.
  virtual absl::Status AllreduceSum(absl::Span<float> data) = 0;
  // out <- every member's `in` (the same length on every member), in rank
  // order: out.size() must be size() * in.size().
  virtual absl::Status Allgather(absl::Span<const float> in, absl::Span<float> out) = 0;
  // data <- member root's data.
  virtual absl::Status Broadcast(absl::Span<float> data, int root) = 0;

  // Every member calls it (as MPI_Comm_split): the members of one `color`
  // (>= 0) form a new group, ranked by (key, rank here). Returns this
  // member's Collective in its new group; it must be destroyed before this
  // one. Colors and keys must be below 2^24. (The partitions of one model
  // replica, or the same partition across replicas.)
  virtual absl::StatusOr<std::unique_ptr<Collective>> Split(int color, int key) = 0;
};

}  // namespace ps

#endif  // PS_WORKER_COLLECTIVE_COLLECTIVE_H_
