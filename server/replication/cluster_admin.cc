#include "server/replication/cluster_admin.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/cluster_keys.h"
#include "common/cluster_state.h"

namespace ps {
namespace {

std::vector<int> ShardsServed(const proto::RingRecord& ring, uint32_t server, bool joining) {
  std::vector<int> shards;
  for (int i = 0; i < ring.shards_size(); ++i) {
    const auto& list = joining ? ring.shards(i).joining() : ring.shards(i).servers();
    if (std::find(list.begin(), list.end(), server) != list.end()) shards.push_back(i);
  }
  return shards;
}

std::string ShardList(const std::vector<int>& shards) {
  return shards.empty() ? "none" : absl::StrJoin(shards, ", ");
}

absl::StatusOr<ClusterState> ReadWithRing(KvStore& kv, const std::string& cluster) {
  absl::StatusOr<ClusterState> state = ReadClusterState(kv, cluster);
  if (!state.ok()) return state.status();
  if (!state->has_ring) {
    return absl::NotFoundError(absl::StrCat("cluster '", cluster,
                                            "' has no ring in etcd yet: are its first servers "
                                            "(ids 0..shards-1) running with --cluster=",
                                            cluster, "?"));
  }
  return state;
}

absl::Status CheckLive(const ClusterState& state, const std::string& cluster, uint32_t server) {
  if (state.inputs.live.count(server)) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat(
      "server ", server, " is not registered in cluster '", cluster,
      "' (start it first: ps_server --etcd=... --cluster=", cluster, " --server_id=", server,
      "; a stopped server's registration ends with its lease)"));
}

// Writes the request key, attached to the server's lease.
absl::Status Request(KvStore& kv, const ClusterState& state, const std::string& key,
                     uint32_t server) {
  auto lease = state.member_leases.find(server);
  absl::StatusOr<int64_t> put =
      kv.Put(key, "{}", lease == state.member_leases.end() ? 0 : lease->second);
  if (absl::IsNotFound(put.status())) {
    return absl::NotFoundError(
        absl::StrCat("server ", server, " left the cluster (its etcd lease ended)"));
  }
  return put.status();
}

// Reads the cluster until `check` gives a result (the request is done or
// cannot be), reporting each ring version; etcd being unavailable for a
// while is waited out.
template <typename T>
absl::StatusOr<T> WaitFor(
    const ClusterAdminOptions& options, uint32_t server, const std::string& what,
    const std::function<std::optional<absl::StatusOr<T>>(const ClusterState&, bool settled)>&
        check) {
  const absl::Time start = options.clock->Now();
  const absl::Time deadline = start + options.timeout;
  uint64_t reported = 0;
  std::string last = "no ring read";
  while (true) {
    absl::StatusOr<ClusterState> state = ReadWithRing(*options.kv, options.cluster);
    if (state.ok()) {
      absl::StatusOr<ShardRing> ring = ShardRing::FromRecord(state->ring);
      if (!ring.ok()) return ring.status();
      last = ring->Describe();
      if (ring->version() != reported && options.progress) {
        options.progress(absl::StrFormat(
            "%6.2f s  %s", absl::ToDoubleSeconds(options.clock->Now() - start), last));
      }
      reported = ring->version();
      if (absl::Status live = CheckLive(*state, options.cluster, server); !live.ok()) {
        return live;
      }
      // Settled: no copy is being made, and the manager has nothing to do.
      bool settled = !NextRing(state->ring, state->inputs).has_value();
      for (const proto::ShardChain& chain : state->ring.shards()) {
        settled = settled && chain.joining().empty();
      }
      if (std::optional<absl::StatusOr<T>> result = check(*state, settled)) return *result;
    } else if (!absl::IsUnavailable(state.status())) {
      return state.status();
    } else if (options.progress) {
      options.progress(absl::StrCat("etcd unavailable, still waiting: ", state.status().message()));
    }
    const absl::Time now = options.clock->Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("server ", server, ": ", what, " not done after ",
                       absl::FormatDuration(options.timeout), " (", last, ")"));
    }
    const absl::Time wake = std::min(deadline, now + absl::Seconds(1));
    if (state.ok()) {
      (void)options.kv->WaitForChange(ClusterPrefix(options.cluster), state->revision, wake);
    } else {
      options.clock->SleepFor(std::min(absl::Milliseconds(500), wake - now));
    }
  }
}

}  // namespace

absl::StatusOr<ShardRing> ReadRing(KvStore& kv, const std::string& cluster) {
  absl::StatusOr<ClusterState> state = ReadWithRing(kv, cluster);
  if (!state.ok()) return state.status();
  return ShardRing::FromRecord(state->ring);
}

absl::StatusOr<std::vector<int>> AddServer(const ClusterAdminOptions& options, uint32_t server) {
  absl::StatusOr<ClusterState> state = ReadWithRing(*options.kv, options.cluster);
  if (!state.ok()) return state.status();
  if (absl::Status s = CheckLive(*state, options.cluster, server); !s.ok()) return s;
  const auto& draining = state->inputs.draining;
  if (std::find(draining.begin(), draining.end(), server) != draining.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("server ", server, " is being drained; it cannot also be added"));
  }
  if (absl::Status s = Request(*options.kv, *state, AddKey(options.cluster, server), server);
      !s.ok()) {
    return s;
  }
  using Result = std::vector<int>;
  return WaitFor<Result>(
      options, server, "adding",
      [&](const ClusterState& now, bool settled) -> std::optional<absl::StatusOr<Result>> {
        if (!settled) return std::nullopt;
        Result held = ShardsServed(now.ring, server, /*joining=*/false);
        if (held.empty()) {
          return absl::StatusOr<Result>(absl::FailedPreconditionError(
              absl::StrCat("the ring settled without giving server ", server,
                           " a shard: ", now.ring.shards_size(), " shards x ", now.ring.replicas(),
                           " copies are already "
                           "spread over the other servers")));
        }
        return absl::StatusOr<Result>(std::move(held));
      });
}

absl::Status DrainServer(const ClusterAdminOptions& options, uint32_t server) {
  absl::StatusOr<ClusterState> state = ReadWithRing(*options.kv, options.cluster);
  if (!state.ok()) return state.status();
  if (absl::Status s = CheckLive(*state, options.cluster, server); !s.ok()) return s;
  std::vector<uint32_t> others;
  for (const auto& [id, member] : state->inputs.live) {
    const auto& draining = state->inputs.draining;
    if (id != server && std::find(draining.begin(), draining.end(), id) == draining.end()) {
      others.push_back(id);
    }
  }
  if (others.size() < state->ring.replicas()) {
    return absl::FailedPreconditionError(
        absl::StrCat("draining server ", server, " would leave ", others.size(),
                     " live server(s) (", absl::StrJoin(others, ", "), ") for ",
                     state->ring.replicas(), " copies of each shard; add a server first"));
  }
  if (absl::Status s = Request(*options.kv, *state, DrainKey(options.cluster, server), server);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<bool> done = WaitFor<bool>(
      options, server, "draining",
      [&](const ClusterState& now, bool settled) -> std::optional<absl::StatusOr<bool>> {
        const std::vector<int> held = ShardsServed(now.ring, server, false);
        const std::vector<int> joining = ShardsServed(now.ring, server, true);
        if (held.empty() && joining.empty()) return absl::StatusOr<bool>(true);
        if (!settled) return std::nullopt;
        return absl::StatusOr<bool>(absl::FailedPreconditionError(
            absl::StrCat("the ring settled with server ", server, " still holding shards ",
                         ShardList(held), ": no other live server can take them")));
      });
  return done.status();
}

}  // namespace ps
