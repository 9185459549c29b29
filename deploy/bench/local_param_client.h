// LocalParamClient: a ParamClient backed by a ShardStore in this process, no
// sockets. The trainer runs the same code path as against a cluster, so the
// difference in examples/s is the cost of distribution. Thread-safe (the
// store is).
#ifndef PS_DEPLOY_BENCH_LOCAL_PARAM_CLIENT_H_
#define PS_DEPLOY_BENCH_LOCAL_PARAM_CLIENT_H_

#include "server/store/shard_store.h"
#include "worker/client/param_client.h"

namespace ps {

class LocalParamClient final : public ParamClient {
 public:
  LocalParamClient() : store_(0, Placement(1)) {}

  absl::Status CreateTable(const proto::TableDef& def) override;
  absl::Status Pull(absl::Span<const PullRange> ops, uint64_t clock, PullInfo* info) override;
  absl::Status Push(absl::Span<const PushRange> ops, uint64_t clock, Versions* versions) override;
  int num_servers() const override { return 1; }

 private:
  ShardStore store_;
};

}  // namespace ps

#endif  // PS_DEPLOY_BENCH_LOCAL_PARAM_CLIENT_H_
