// VectorOpsRunner: a shard's side of Sandblaster L-BFGS (the VectorOps RPC):
// checks a request, runs its ops on the shard's store and remembers the last
// reply per table, so that the coordinator's retry of a request (same id)
// gets the same partial sums and changes nothing. The coordinator sends one
// request at a time per table, so the last reply is all a retry can need.
// Thread-safe: requests on one table run one at a time.
#ifndef PS_SERVER_CORE_VECTOR_OPS_RUNNER_H_
#define PS_SERVER_CORE_VECTOR_OPS_RUNNER_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/ps.pb.h"
#include "server/store/shard_store.h"

namespace ps {

class VectorOpsRunner {
 public:
  // `store` must outlive the runner.
  explicit VectorOpsRunner(ShardStore* store) : store_(store) {}

  // Runs the request's ops (ShardStore::RunVectorOps) unless its id (> 0)
  // is the table's last, whose reply it returns again. Errors: those of
  // RunVectorOps; FAILED_PRECONDITION on a replicated shard (`replicated`:
  // vector ops are not forwarded down a chain), naming the table;
  // INVALID_ARGUMENT for more than max_ops ops.
  absl::StatusOr<proto::VectorOpsResponse> Run(const proto::VectorOpsRequest& request,
                                               bool replicated, size_t max_ops = 4096);

 private:
  struct Last {
    uint64_t request_id = 0;
    proto::VectorOpsResponse reply;
  };
  ShardStore* const store_;
  absl::Mutex mu_;  // held while a request runs: one at a time
  absl::flat_hash_map<std::string, Last> last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_CORE_VECTOR_OPS_RUNNER_H_
