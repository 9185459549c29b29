// RoundReducer: BSP rounds with a deterministic reduction
// (proto::PushRequest.reduce). Each push of a round is the gradient of a
// block of the job's logical workers: one worker, or a host's workers summed
// by its LocalAggregator (worker/client/local_aggregator.h). The pushes of
// one round of one table are held until every live worker has all its parts
// of the round in. Then they are summed in a fixed pairwise tree over the
// logical workers: ((w0 + w1) + (w2 + w3)) ..., a block of size 2^k at
// first = i * 2^k entering as the tree's node (k, i). So the sum depends
// neither on the order the pushes arrived in nor on how the workers were
// grouped into hosts, and the round is applied as one optimizer step.
//
// Thread-safe. Knows nothing of the store or of clocks: PsCore says which
// workers are live and applies the rounds this returns.
#ifndef PS_SERVER_CORE_ROUND_REDUCER_H_
#define PS_SERVER_CORE_ROUND_REDUCER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/key_spec.h"
#include "proto/ps.pb.h"
#include "server/core/request_args.h"

namespace ps {

class RoundReducer {
 public:
  using Done = std::function<void(absl::StatusOr<proto::PushResponse>)>;
  // A push held for its round, and whoever waits for it (a retry of a held
  // push, same worker and request id, waits on the same one). `args` stays
  // valid until the dones have run (each owns its call's state).
  struct Held {
    const PushArgs* args = nullptr;
    std::vector<Done> dones;
    absl::Time deadline;
  };
  struct Round {
    std::string table;
    uint64_t clock = 0;
    std::vector<Held> pushes;
  };

  // OK, or INVALID_ARGUMENT naming the table and the block: a block whose
  // size is not a power of two or whose first is not a multiple of it.
  static absl::Status CheckBlock(const proto::PushRequest& header);
  // Whether a push with `reduce` can be reduced: INVALID_ARGUMENT naming
  // the table unless it is BSP (`bsp`), to a dense table `def` without
  // LARS, by key ranges, with a valid block (CheckBlock);
  // FAILED_PRECONDITION on a replicated server (`replicated`).
  static absl::Status CheckPush(const PushArgs& args, const proto::TableDef& def, bool bsp,
                                bool replicated);

  // Holds a push whose round every live worker has read. Returns the round
  // when this push completed it: every worker of `live` has its
  // round_parts (1 when 0) pushes of the round held.
  std::optional<Round> Add(const PushArgs* args, absl::Time deadline, Done done,
                           absl::Span<const uint32_t> live);
  // The rounds that `live` now completes (a worker's lease expired or it
  // left), after failing with DEADLINE_EXCEEDED the pushes held past their
  // deadline as of `now` (they leave their round).
  std::vector<Round> Tick(absl::Span<const uint32_t> live, absl::Time now);
  // Fails every held push with `status`.
  void FailAll(const absl::Status& status);
  size_t held() const;

  // A complete round's sums: its pushes grouped by their key ranges (a
  // group is one part of the round's values, the same ranges from every
  // block), each group's values summed over the tree. Clock-only pushes
  // belong to no group. Errors: INVALID_ARGUMENT naming the table when two
  // blocks of a group overlap, or two pushes of a group differ in length.
  struct Sum {
    KeySpec keys;
    std::vector<float> values;
    std::vector<const Held*> pushes;  // those summed
  };
  static absl::StatusOr<std::vector<Sum>> SumRound(const Round& round);

 private:
  using RoundKey = std::pair<std::string, uint64_t>;  // table, clock
  // Whether every worker of `live` has all its parts of the round held.
  static bool CompleteFor(const Round& round, absl::Span<const uint32_t> live);

  mutable absl::Mutex mu_;
  std::map<RoundKey, Round> rounds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_CORE_ROUND_REDUCER_H_
