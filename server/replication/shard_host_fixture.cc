#include "server/replication/shard_host_fixture.h"

#include <cstring>
#include <utility>

#include "absl/synchronization/notification.h"
#include "proto/membership.pb.h"
#include "server/core/ps_core_test_peer.h"
#include "server/core/request_args.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace hosttest {

std::string Address(uint32_t server) { return absl::StrCat("h", server); }

// host.Forward, waited for (bounded) as a blocking transport call.
absl::StatusOr<proto::ForwardResponse> CallForward(ShardHost& host,
                                                   const proto::ForwardRequest& request,
                                                   absl::Duration timeout) {
  struct Answer {
    absl::Notification done;
    absl::Status status;
    proto::ForwardResponse response;
  };
  auto answer = std::make_shared<Answer>();  // the callback may outlive a timed-out wait
  host.Forward(request, [answer](absl::Status s, proto::ForwardResponse r) {
    answer->status = std::move(s);
    answer->response = std::move(r);
    answer->done.Notify();
  });
  if (!answer->done.WaitForNotificationWithTimeout(timeout)) {
    return absl::DeadlineExceededError("ShardHost::Forward did not answer");
  }
  if (!answer->status.ok()) return answer->status;
  return answer->response;
}

void InMemoryTransport::Add(const std::string& address, std::shared_ptr<ShardHost> host) {
  absl::MutexLock lock(&mu_);
  host.swap(hosts_[address]);
}

void InMemoryTransport::Clear() {
  std::map<std::string, std::shared_ptr<ShardHost>> hosts;
  absl::MutexLock lock(&mu_);
  hosts.swap(hosts_);
}

int InMemoryTransport::snapshot_parts(const std::string& address) const {
  absl::MutexLock lock(&mu_);
  auto it = snapshot_parts_.find(address);
  return it == snapshot_parts_.end() ? 0 : it->second;
}

absl::StatusOr<proto::ForwardResponse> InMemoryTransport::Forward(
    const std::string& address, const proto::ForwardRequest& request, absl::Duration timeout) {
  std::shared_ptr<ShardHost> host;
  {
    absl::MutexLock lock(&mu_);
    auto it = hosts_.find(address);
    if (it == hosts_.end() || it->second == nullptr) {
      return absl::UnavailableError(absl::StrCat("no host at ", address));
    }
    host = it->second;
    for (const auto& e : request.entries()) snapshot_parts_[address] += e.has_snapshot();
  }
  return CallForward(*host, request, timeout);
}

// A ring of one chain per shard; members are the servers named, at "h<id>",
// incarnation 100 + id unless given, and those given.
std::shared_ptr<const ShardRing> Ring(uint64_t version, const std::vector<Chain>& chains,
                                      std::map<uint32_t, uint64_t> incarnations) {
  proto::RingRecord record;
  record.set_version(version);
  record.set_replicas(2);
  auto member = [&](uint32_t s) {
    proto::MemberRecord& m = (*record.mutable_members())[s];
    m.set_server_id(s);
    m.set_address(Address(s));
    m.set_incarnation(incarnations.count(s) ? incarnations[s] : 100 + s);
  };
  for (const Chain& c : chains) {
    proto::ShardChain* chain = record.add_shards();
    for (uint32_t s : c.servers) chain->add_servers(s), member(s);
    for (uint32_t s : c.joining) chain->add_joining(s), member(s);
  }
  for (const auto& [s, incarnation] : incarnations) member(s);  // live, maybe in no chain
  absl::StatusOr<ShardRing> ring = ShardRing::FromRecord(record);
  EXPECT_TRUE(ring.ok()) << ring.status();
  return std::make_shared<const ShardRing>(*std::move(ring));
}

proto::CreateTableRequest SumTable() {
  return CreateTableRequestFor(ps::SumTable("w", kKeys, kWidth));
}

// Waits (bounded) until every update applied on `core` so far is at the tail.
absl::Status Replicated(PsCore& core) {
  auto result = std::make_shared<std::pair<absl::Notification, absl::Status>>();
  core.AfterReplicated([result](absl::Status s) {
    result->second = std::move(s);
    result->first.Notify();
  });
  if (!result->first.WaitForNotificationWithTimeout(kWait)) {
    return absl::DeadlineExceededError("AfterReplicated did not run");
  }
  return result->second;
}

absl::Status CreateTable(PsCore& core) {
  if (absl::Status s = core.CreateTable(SumTable()).status(); !s.ok()) return s;
  return Replicated(core);
}

// A push of every key (distinct values per key and request) by worker 1,
// at clock request_id, then its replication; the push's status, else the
// replication's.
absl::Status Push(PsCore& core, uint64_t request_id) {
  proto::PushRequest req;
  req.set_table("w");
  req.set_worker_id(1);
  req.set_request_id(request_id);
  req.set_clock(request_id);
  req.add_ranges()->set_end(kKeys);
  std::vector<float> grads(kKeys * kWidth);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = -static_cast<float>(request_id * (i + 1));
  req.set_values(
      std::string(reinterpret_cast<const char*>(grads.data()), grads.size() * sizeof(float)));
  PushArgs args;
  if (absl::Status s = DecodePush(req, &core.key_lists(), &args); !s.ok()) return s;
  absl::Status pushed = absl::DeadlineExceededError("an async push completes inside Push");
  core.Push(&args, absl::InfiniteFuture(),
            [&pushed](absl::StatusOr<proto::PushResponse> r) { pushed = r.status(); });
  if (!pushed.ok()) return pushed;
  return Replicated(core);
}

// "table/worker=clock" for each worker clock the core keeps.
std::vector<std::string> WorkerClocks(PsCore& core) {
  std::vector<std::string> out;
  for (const ClockTracker::WorkerClock& c : PsCoreTestPeer::clocks(core).Clocks(UINT64_MAX)) {
    out.push_back(absl::StrCat(c.table, "/", c.worker, "=", c.clock));
  }
  return out;
}

std::vector<float> Values(PsCore& core) {
  std::string bytes;
  absl::StatusOr<uint64_t> read =
      PsCoreTestPeer::store(core).Pull("w", KeySpec::Single(0, kKeys), &bytes);
  EXPECT_TRUE(read.ok()) << read.status();
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

}  // namespace hosttest
}  // namespace ps
