// LocalAggregator: the workers of one process (trainer threads) sharing one
// connection to the servers, as MXNet's hierarchical parameter server shares
// a host's (Li et al., 2014; Chen et al., 2015): each round, the members'
// gradients are summed and pushed once, and the parameters are pulled once
// and handed to every member. The servers see one worker (the upstream
// client's id) and a push of the sum, so bytes to the servers fall by the
// number of members.
//
// Each member is a ParamClient (member(i)) for one trainer thread. The
// members' calls meet per round: a call waits until every member still
// training has made its call of the round, then the last to arrive makes
// the upstream call for all, and each returns with the shared result.
//   - A round is a pull at read clock c (Pull(c)), a push at clock c
//     (Push(c)), or both (PushPull(c): push c, read c + 1). Members may
//     differ in whether they push or read in a round (a member whose data
//     ran out pushes its last round without reading), not in the clocks:
//     INVALID_ARGUMENT "members out of step" otherwise, to all of them.
//   - The ops of every member must name the same tables and ranges.
//   - The sum is taken in a fixed order (a pairwise tree over the members'
//     indices), so it does not depend on which thread arrived first.
//   - LARS: the sum's layer norms are recomputed (the weight norm is the
//     members' own, who read the same parameters).
//   - A member that stops training calls Leave(i): later rounds no longer
//     wait for it (shards may differ by a few batches).
// Thread-safe; member(i) is to be used by one thread at a time.
#ifndef PS_WORKER_CLIENT_LOCAL_AGGREGATOR_H_
#define PS_WORKER_CLIENT_LOCAL_AGGREGATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "proto/ps.pb.h"
#include "worker/client/param_client.h"

namespace ps {

class LocalAggregator {
 public:
  // `upstream` (the process's connection) must outlive the aggregator.
  LocalAggregator(ParamClient& upstream, int members);
  ~LocalAggregator();
  LocalAggregator(const LocalAggregator&) = delete;
  LocalAggregator& operator=(const LocalAggregator&) = delete;

  ParamClient& member(int i);
  // Member i trains no more; a round it had not joined goes on without it.
  void Leave(int i);

  // What went to and came from the servers (values; 4 bytes each as f32).
  int64_t values_pushed() const;
  int64_t values_pulled() const;
  int64_t upstream_calls() const;

 private:
  class Member;
  // One member's call in a round.
  struct Call {
    std::optional<uint64_t> push_clock, read_clock;
    absl::Span<const PushRange> push;
    absl::Span<const PullRange> pull;
    PullInfo* info = nullptr;
    Versions* versions = nullptr;
  };

  // Joins the current round with member i's call and returns once the
  // round's upstream call has been made, with its status; its pulled values
  // copied into the call's pull spans.
  absl::Status Join(int i, const Call& call);
  // The calls of a round, in member order: those that push, those that read.
  struct RoundCalls {
    std::vector<const Call*> pushers, readers;
  };
  // The round's upstream call, made by the last member to join: the calls
  // checked to be in step (CheckRound), then one push of their gradients'
  // sum (SumPushes: sum_ and push_ops_) and one read, as they ask.
  void RunRound() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static absl::Status CheckRound(const RoundCalls& calls);
  absl::Status UpstreamCall(const RoundCalls& calls) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SumPushes(const std::vector<const Call*>& pushers) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ParamClient& upstream_;
  std::vector<std::unique_ptr<Member>> members_;

  mutable absl::Mutex mu_;
  std::vector<bool> active_ ABSL_GUARDED_BY(mu_);
  std::vector<std::optional<Call>> joined_ ABSL_GUARDED_BY(mu_);  // this round's calls
  int joined_count_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t round_ ABSL_GUARDED_BY(mu_) = 0;  // rounds completed
  // The last round's outcome, read by its members before the next starts
  // (it cannot start before every member of this one has returned).
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<float>> sum_ ABSL_GUARDED_BY(mu_), pulled_ ABSL_GUARDED_BY(mu_);
  std::vector<proto::LayerNorms> norms_ ABSL_GUARDED_BY(mu_);
  std::vector<PushRange> push_ops_ ABSL_GUARDED_BY(mu_);
  std::vector<PullRange> pull_ops_ ABSL_GUARDED_BY(mu_);
  PullInfo info_ ABSL_GUARDED_BY(mu_);
  Versions versions_ ABSL_GUARDED_BY(mu_);
  int64_t values_pushed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t values_pulled_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t upstream_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ps

#endif  // PS_WORKER_CLIENT_LOCAL_AGGREGATOR_H_
