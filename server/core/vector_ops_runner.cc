#include "server/core/vector_ops_runner.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ps {

absl::StatusOr<proto::VectorOpsResponse> VectorOpsRunner::Run(
    const proto::VectorOpsRequest& request, bool replicated, size_t max_ops) {
  if (replicated) {
    return absl::FailedPreconditionError(absl::StrCat(
        "vector ops on table '", request.table(),
        "': this server is replicated, and L-BFGS's vector ops are not forwarded down a chain; "
        "run --algorithm=lbfgs on servers without --replication"));
  }
  if (static_cast<size_t>(request.ops_size()) > max_ops) {
    return absl::InvalidArgumentError(
        absl::StrCat("vector ops on table '", request.table(), "': ", request.ops_size(),
                     " ops in one request, over the limit of ", max_ops));
  }
  absl::MutexLock lock(&mu_);
  auto it = last_.find(request.table());
  if (request.request_id() != 0 && it != last_.end() &&
      it->second.request_id == request.request_id()) {
    return it->second.reply;  // a retry: answered, not applied again
  }
  absl::StatusOr<ShardStore::VectorOpsResult> result = store_->RunVectorOps(
      request.table(), std::vector<proto::VectorOp>(request.ops().begin(), request.ops().end()),
      request.clock());
  if (!result.ok()) return result.status();
  proto::VectorOpsResponse reply;
  reply.mutable_partials()->Add(result->partials.begin(), result->partials.end());
  reply.set_values(result->values);
  last_[request.table()] = Last{request.request_id(), reply};
  return reply;
}

}  // namespace ps
