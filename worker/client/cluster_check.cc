#include "worker/client/cluster_check.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "worker/client/call_runner.h"

namespace ps {

namespace {

// Info of every server, in `replies`, and each call's status. Servers may
// still be starting: they are waited for up to the deadline, in one attempt
// each. With `replicated`, one that answers UNAVAILABLE is asked again every
// kMaxBackoff until the deadline, and each attempt lasts at most
// kReplicatedAttempt: a shard's primary may be dead (its lease not expired
// yet), and the next attempt goes to the primary of the ring then.
void AskEveryServer(Transport* transport, Clock* clock, absl::Time deadline, bool replicated,
                    std::vector<proto::InfoResponse>* replies, std::vector<absl::Status>* status) {
  constexpr absl::Duration kReplicatedAttempt = absl::Seconds(2);
  const proto::InfoRequest request;
  std::vector<int> pending(transport->num_servers());
  for (int s = 0; s < transport->num_servers(); ++s) pending[s] = s;
  while (!pending.empty()) {
    absl::BlockingCounter countdown(static_cast<int>(pending.size()));
    const absl::Time attempt_deadline =
        replicated ? std::min(deadline, clock->Now() + kReplicatedAttempt) : deadline;
    for (int s : pending) {
      transport->Info(s, request, attempt_deadline, /*wait_for_ready=*/true, &(*replies)[s],
                      [&countdown, status, s](absl::Status result) {
                        (*status)[s] = std::move(result);
                        countdown.DecrementCount();
                      });
    }
    countdown.Wait();
    std::vector<int> again;
    for (int s : pending) {
      const absl::Status& got = (*status)[s];
      if (replicated && (absl::IsUnavailable(got) || absl::IsDeadlineExceeded(got)) &&
          clock->Now() + kMaxBackoff < deadline) {
        again.push_back(s);
      }
    }
    if (!again.empty()) clock->SleepFor(kMaxBackoff);
    pending = std::move(again);
  }
}

// Server s (of n), called `name`, answered `info`.
absl::Status CheckServerInfo(const ClusterExpectation& expected, const std::string& name, int s,
                             int n, const proto::InfoResponse& info) {
  const PlacementConfig& placement = expected.placement;
  if (info.server_index() != static_cast<uint32_t>(s) ||
      info.num_servers() != static_cast<uint32_t>(n) || info.slice_size() != placement.slice_size ||
      info.virtual_nodes() != static_cast<uint32_t>(placement.virtual_nodes)) {
    return absl::FailedPreconditionError(
        absl::StrCat(name, " reports shard ", info.server_index(), " of ", info.num_servers(),
                     " (slice_size ", info.slice_size(), ", virtual_nodes ", info.virtual_nodes(),
                     ") but this worker expects shard ", s, " of ", n, " (slice_size ",
                     placement.slice_size, ", virtual_nodes ", placement.virtual_nodes,
                     "); start every process with the same --servers"));
  }
  // Every retry of a push must reach the server while it still remembers
  // the push's id, or a retry of an applied push would apply it twice.
  const absl::Duration retention = absl::Milliseconds(info.dedup_retention_ms());
  const int attempts = std::max(1, expected.max_attempts);
  absl::Duration window = expected.timeout * attempts;
  for (int a = 1; a < attempts; ++a) window += std::min(expected.retry_backoff * a, kMaxBackoff);
  if (info.dedup_retention_ms() > 0 && window >= retention) {
    return absl::FailedPreconditionError(absl::StrCat(
        name, " remembers push ids for ", absl::FormatDuration(retention),
        " (ps_server --dedup_retention_seconds), but this worker may retry a push for up to ",
        absl::FormatDuration(window), " (", attempts, " attempts of ",
        absl::FormatDuration(expected.timeout),
        ", see --timeout_seconds); a late retry could be applied twice. Lower "
        "--timeout_seconds or raise the servers' --dedup_retention_seconds"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckCluster(Transport* transport, Clock* clock, const ClusterExpectation& expected) {
  const int n = transport->num_servers();
  std::vector<proto::InfoResponse> replies(n);
  std::vector<absl::Status> status(n);
  AskEveryServer(transport, clock, clock->Now() + expected.connect_timeout, expected.replicated,
                 &replies, &status);
  for (int s = 0; s < n; ++s) {
    const std::string name = transport->ServerName(s);
    if (!status[s].ok()) {
      return absl::Status(
          status[s].code(),
          absl::StrCat(name, " did not answer within ",
                       absl::FormatDuration(expected.connect_timeout), " (", status[s].message(),
                       "); is it running? see --servers. A server with TLS "
                       "answers only clients with --tls_ca, and --tls_cert and "
                       "--tls_key from its CA"));
    }
    if (absl::Status mismatch = CheckServerInfo(expected, name, s, n, replies[s]); !mismatch.ok()) {
      return mismatch;
    }
  }
  return absl::OkStatus();
}

}  // namespace ps
