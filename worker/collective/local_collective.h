// LocalCollective: a Collective among the threads of one process, for tests
// and for members that share a process. A LocalGroup of N members is made
// once; each thread takes its member with Member(rank). An operation waits
// until every member has called it, up to the group's timeout
// (DEADLINE_EXCEEDED naming the ranks that did not come: a member that
// died, or called another operation, never hangs the others). Sums are
// taken in rank order, so every member gets the same bits. Thread-safe as
// far as the Collective contract asks (one thread per member).
#ifndef PS_WORKER_COLLECTIVE_LOCAL_COLLECTIVE_H_
#define PS_WORKER_COLLECTIVE_LOCAL_COLLECTIVE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/collective/collective.h"

namespace ps {

class LocalGroup {
 public:
  LocalGroup(int size, absl::Duration timeout);
  ~LocalGroup();
  // Member `rank`'s Collective (owned by the group, which must outlive it).
  Collective* Member(int rank);
  int size() const { return size_; }

  // The group of `color` made by the `split`-th Split of this group, of
  // `size` members: made by the first member that asks, shared with the
  // others (Split's implementation).
  std::shared_ptr<LocalGroup> Subgroup(uint64_t split, int color, int size);

 private:
  class Seat;  // a member's Collective
  friend class Seat;
  // What one member brought to the current operation.
  struct Arrival {
    const float* in = nullptr;
    float* out = nullptr;
    size_t n = 0;
  };
  // Runs the operation `what` (its kind, lengths and root: every member's
  // must be the same): waits for all; the last to arrive writes every
  // member's result with `reduce` while the others wait. Errors:
  // DEADLINE_EXCEEDED naming the missing ranks; INVALID_ARGUMENT when
  // members called different operations; FAILED_PRECONDITION once the group
  // is broken (by either).
  using Reduce = void (*)(const std::vector<Arrival>& arrivals, int root);
  absl::Status Run(int rank, const std::string& what, const Arrival& mine, Reduce reduce, int root);

  const int size_;
  const absl::Duration timeout_;
  std::vector<std::unique_ptr<Seat>> members_;

  absl::Mutex mu_;
  std::string what_ ABSL_GUARDED_BY(mu_);  // the current operation ("": none)
  std::vector<Arrival> arrivals_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> arrived_ ABSL_GUARDED_BY(mu_);
  int count_ ABSL_GUARDED_BY(mu_) = 0;       // arrived at the current operation
  uint64_t done_ ABSL_GUARDED_BY(mu_) = 0;   // operations completed
  std::string broken_ ABSL_GUARDED_BY(mu_);  // why the group is broken ("": it is not)
  std::map<std::pair<uint64_t, int>, std::shared_ptr<LocalGroup>> subgroups_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_WORKER_COLLECTIVE_LOCAL_COLLECTIVE_H_
