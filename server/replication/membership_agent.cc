#include "server/replication/membership_agent.h"

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cluster_keys.h"
#include "common/cluster_state.h"
#include "common/log.h"
#include "common/random_id.h"
#include "common/shard_ring.h"
#include "proto/membership.pb.h"

namespace ps {

bool EtcdDownEverywhere(const std::vector<absl::StatusOr<proto::EtcdContactResponse>>& peers,
                        absl::Duration silent) {
  for (const absl::StatusOr<proto::EtcdContactResponse>& peer : peers) {
    if (!peer.ok()) return false;
    // A peer whose calls hang (etcd stopped, not down: connections open,
    // nothing answers) has its last call still answered; its silence
    // since then tells.
    const bool quiet = peer->millis_since_answer() < 0 ||
                       absl::Milliseconds(peer->millis_since_answer()) >= silent;
    if (peer->last_call_answered() && !quiet) return false;
  }
  return true;
}

MembershipAgent::MembershipAgent(MembershipOptions options, ShardHost* host)
    : options_(std::move(options)),
      host_(host),
      own_contact_(options_.clock),
      contact_(options_.contact != nullptr ? options_.contact : &own_contact_),
      incarnation_(options_.incarnation != 0 ? options_.incarnation : RandomNonZeroId()) {}

absl::StatusOr<std::unique_ptr<MembershipAgent>> MembershipAgent::Start(MembershipOptions options,
                                                                        ShardHost* host) {
  if (options.kv == nullptr || options.num_shards < 1 || options.replicas < 1 ||
      options.num_servers > options.num_shards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "membership needs an etcd endpoint (--etcd), shards >= 1, replicas >= 1 "
        "and no more servers than shards; got shards ",
        options.num_shards, ", replicas ", options.replicas, ", servers ", options.num_servers));
  }
  std::unique_ptr<MembershipAgent> agent(new MembershipAgent(std::move(options), host));
  if (absl::Status s = agent->Register(); !s.ok()) return s;
  agent->keepalive_ = std::thread([a = agent.get()] { a->KeepAliveLoop(); });
  agent->watcher_ = std::thread([a = agent.get()] { a->WatchLoop(); });
  agent->fencer_ = std::thread([a = agent.get()] { a->FenceLoop(); });
  return agent;
}

MembershipAgent::~MembershipAgent() { Stop(false); }

std::string MembershipAgent::Who() const {
  return absl::StrCat("ps_server id ", options_.server_id, " ", options_.address);
}

bool MembershipAgent::Stopping() {
  absl::MutexLock lock(&mu_);
  return stop_;
}

absl::Status MembershipAgent::Register() {
  const absl::Time sent = options_.clock->Now();
  absl::StatusOr<int64_t> lease = options_.kv->GrantLease(options_.lease);
  contact_->Note(sent, lease.status());
  if (!lease.ok()) return lease.status();
  bool again;
  {
    absl::MutexLock lock(&mu_);
    again = registered_;
  }
  proto::MemberRecord member;
  member.set_server_id(options_.server_id);
  member.set_address(options_.address);
  member.set_incarnation(incarnation_);
  // Copies its earlier processes kept: a chain all of whose servers are
  // away may resume from one (NextRing).
  for (const auto& [shard, held_by] : host_->Offers()) {
    (*member.mutable_kept())[static_cast<uint32_t>(shard)] = held_by;
  }
  // Copies this server held under an older incarnation are gone from the
  // ring's point of view; so are its synced records. (Registering again,
  // this process keeps its copies and its records.)
  if (!again) {
    if (absl::StatusOr<KvRange> synced =
            options_.kv->GetPrefix(ClusterPrefix(options_.cluster) + "synced/");
        synced.ok()) {
      for (const KvEntry& e : synced->entries) {
        if (absl::EndsWith(e.key, absl::StrCat("/", options_.server_id))) {
          (void)options_.kv->Delete(e.key);
        }
      }
    }
  }
  absl::StatusOr<int64_t> put =
      options_.kv->Put(MemberKey(options_.cluster, options_.server_id), ToJson(member), *lease);
  if (!put.ok()) return put.status();
  // Into a running cluster: ask for a share (the manager balances).
  absl::StatusOr<KvRange> ring = options_.kv->Get(RingKey(options_.cluster));
  if (!ring.ok()) return ring.status();
  const bool running = !ring->entries.empty();
  if (running && !options_.standby) {
    absl::StatusOr<int64_t> add =
        options_.kv->Put(AddKey(options_.cluster, options_.server_id), "{}", *lease);
    if (!add.ok()) return add.status();
  }
  absl::MutexLock lock(&mu_);
  lease_ = *lease;
  last_renewed_ = sent;
  registered_ = true;
  if (again) {
    // Serving waits for a ring read after this registration (the ring may
    // have moved while the lease was gone), and managing waits one lease
    // for the others to register again (an etcd stall lapses every lease
    // at once: a manager that dropped them meanwhile would empty chains).
    reread_after_ = *put;
    manage_after_ = options_.clock->Now() + options_.lease;
    LogEvent(Who(), absl::StrCat("registered again in etcd under the same incarnation ",
                                 incarnation_, ": this process still holds its copies"));
    return absl::OkStatus();
  }
  LogEvent(Who(),
           absl::StrCat("registered in etcd cluster '", options_.cluster, "' (lease ttl ",
                        absl::FormatDuration(options_.lease), ", incarnation ", incarnation_, ")",
                        !running           ? ""
                        : options_.standby ? "; standby: waiting for ps_admin add-server"
                                           : "; asking for a share of the shards"));
  return absl::OkStatus();
}

void MembershipAgent::KeepAliveLoop() {
  while (true) {
    int64_t lease;
    {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
      if (options_.clock->AwaitWithTimeout(&mu_, absl::Condition(&stopping), options_.lease / 3)) {
        return;
      }
      lease = lease_;
    }
    const absl::Time sent = options_.clock->Now();
    absl::Status s = lease == 0 ? Register() : options_.kv->KeepAlive(lease);
    contact_->Note(sent, s);
    const absl::Time answered = options_.clock->Now();
    absl::MutexLock lock(&mu_);
    if (s.ok()) {
      // An answer after renewals went unanswered (an etcd stall, a
      // partition from etcd): the others' leases may have lapsed meanwhile,
      // and they are registering again; a manager waits one lease for them
      // before it drops anyone (else the first server back would empty the
      // chains of the others). Measured to the answer: a renewal sent just
      // before a stall hangs through it, and etcd may renew this lease on
      // waking while it expires the others'.
      if (last_renewed_ != absl::InfinitePast() &&
          answered - last_renewed_ > options_.lease * 2 / 3) {
        const absl::Time after = answered + options_.lease;
        if (after > manage_after_) {
          manage_after_ = after;
          LogEvent(Who(), absl::StrCat("etcd answers again after ",
                                       absl::FormatDuration(answered - last_renewed_),
                                       " without; ring changes wait one lease for the others"));
        }
      }
      last_renewed_ = std::max(last_renewed_, sent);
    } else if (absl::IsNotFound(s)) {
      LogEvent(Who(), "etcd lease expired; registering again (same incarnation)");
      lease_ = 0;
      last_renewed_ = absl::InfinitePast();
    }
  }
}

// Separate from the renewals, so that a renewal hanging on a cut-off network
// does not delay the fence.
void MembershipAgent::FenceLoop() {
  bool outage = false;  // etcd down for everyone, as last found
  absl::Time confirmed = absl::InfinitePast();
  const absl::Duration ttl = options_.lease;
  while (true) {
    absl::Time renewed;
    bool expired;
    {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
      if (options_.clock->AwaitWithTimeout(&mu_, absl::Condition(&stopping), ttl / 10)) return;
      renewed = last_renewed_;
      // Registered again but the ring not read since: as good as expired.
      expired = lease_ == 0 || reread_after_ != 0;
    }
    const absl::Time now = options_.clock->Now();
    const absl::Duration late = now - renewed;
    if (expired || late <= ttl / 2) {
      if (outage) LogEvent(Who(), "etcd answers again");
      outage = false;
      host_->SetFenced(expired);
      continue;
    }
    // Etcd was found down for everyone lately: serving on is safe.
    auto fresh = [&] { return outage && now - confirmed <= ttl / 3; };
    // A renewal is late. Past 2/3 of the ttl, fenced at once unless fresh
    // (asking may take a while).
    const bool due = late > ttl * 2 / 3;
    if (due && !fresh()) host_->SetFenced(true);
    // Is etcd down for everyone? Asked from ttl/2 on, again every ttl/6.
    if (!outage || now - confirmed > ttl / 6) {
      const bool everywhere = OutageEverywhere();
      if (everywhere && !outage) {
        std::shared_ptr<const ShardRing> ring = host_->ring();
        LogEvent(Who(), absl::StrCat("etcd unreachable from this server and from every other "
                                     "server of ring v",
                                     ring ? ring->version() : 0,
                                     ": serving on with it; membership changes wait for etcd"));
      }
      if (!everywhere && outage) {
        LogEvent(Who(), "etcd outage over for another server, or one cannot be reached");
      }
      outage = everywhere;
      if (everywhere) confirmed = now;
    }
    const bool still_due = options_.clock->Now() - renewed > ttl * 2 / 3;
    host_->SetFenced(still_due && !fresh());
  }
}

bool MembershipAgent::OutageEverywhere() {
  std::shared_ptr<const ShardRing> ring = host_->ring();
  if (options_.peers == nullptr || ring == nullptr) return false;
  const absl::Duration timeout = std::min(absl::Milliseconds(250), options_.lease / 8);
  for (const auto& [id, member] : ring->record().members()) {
    if (id == options_.server_id) continue;
    if (!EtcdDownEverywhere({options_.peers->EtcdContact(member.address(), timeout)},
                            options_.lease / 2)) {
      return false;
    }
  }
  return true;
}

void MembershipAgent::WatchLoop() {
  int64_t revision = 0;
  int failures = 0;  // in a row: the first is logged, and the recovery
  while (!Stopping()) {
    absl::StatusOr<int64_t> read = Step();
    if (read.ok() && failures > 0) {
      LogEvent(Who(), absl::StrCat("reading the cluster from etcd again, after ", failures,
                                   " failed reads"));
      failures = 0;
    }
    if (!read.ok()) {
      if (failures++ == 0) {
        LogEvent(Who(), absl::StrCat("reading the cluster from etcd: ", read.status().ToString(),
                                     " (retrying every 0.5 s)"));
      }
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
      options_.clock->AwaitWithTimeout(&mu_, absl::Condition(&stopping), absl::Milliseconds(500));
      continue;
    }
    revision = *read;
    // Wake within a second even without a change, to notice Stop.
    (void)options_.kv->WaitForChange(ClusterPrefix(options_.cluster), revision,
                                     options_.clock->Now() + absl::Seconds(1));
  }
}

absl::StatusOr<int64_t> MembershipAgent::Step() {
  const absl::Time sent = options_.clock->Now();
  absl::StatusOr<KvRange> range = options_.kv->GetPrefix(ClusterPrefix(options_.cluster));
  contact_->Note(sent, range.status());
  if (!range.ok()) return range.status();
  absl::StatusOr<ClusterState> state = ParseClusterState(options_.cluster, *range);
  if (!state.ok()) return state.status();
  if (state->has_ring) {
    absl::StatusOr<ShardRing> ring = ShardRing::FromRecord(state->ring);
    if (!ring.ok()) return ring.status();
    std::shared_ptr<const ShardRing> current = host_->ring();
    if (current == nullptr || ring->version() > current->version()) {
      host_->SetRing(std::make_shared<const ShardRing>(*std::move(ring)));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    if (reread_after_ != 0 && range->revision >= reread_after_) reread_after_ = 0;
  }
  // Copies that completed here while etcd was not told (or could not be).
  if (std::shared_ptr<const ShardRing> ring = host_->ring(); ring != nullptr) {
    for (int shard : host_->SyncedShards()) {
      if (shard >= ring->num_shards()) continue;
      const auto& joining = ring->record().shards(shard).joining();
      if (std::find(joining.begin(), joining.end(), options_.server_id) != joining.end() &&
          !state->inputs.synced.count({shard, options_.server_id})) {
        ReportSynced(shard);
      }
    }
  }
  // Only the live server with the lowest id manages.
  const auto& live = state->inputs.live;
  if (live.empty() || live.begin()->first != options_.server_id) return range->revision;
  {
    absl::MutexLock lock(&mu_);
    // Renewals must be current too: the read above may be the first answer
    // after a stall, before the renewal that hung through it returns (and
    // starts the wait above).
    const absl::Time now = options_.clock->Now();
    if (lease_ == 0 || live.begin()->second.incarnation() != incarnation_ || now < manage_after_ ||
        now - last_renewed_ > options_.lease * 2 / 3) {
      return range->revision;
    }
  }
  std::optional<proto::RingRecord> next;
  if (!state->has_ring) {
    std::map<uint32_t, proto::MemberRecord> first;
    const int servers = options_.num_servers > 0 ? options_.num_servers : options_.num_shards;
    for (int i = 0; i < servers; ++i) {
      auto it = live.find(i);
      if (it == live.end()) return range->revision;  // wait for servers 0..n-1
      first[i] = it->second;
    }
    absl::StatusOr<ShardRing> initial =
        ShardRing::Initial(options_.num_shards, options_.replicas, first, options_.restore);
    if (!initial.ok()) return initial.status();
    next = initial->record();
  } else {
    state->inputs.rebuild_lost = options_.rebuild_lost;
    next = NextRing(state->ring, state->inputs);
  }
  if (!next) return range->revision;
  std::vector<KvOp> ops;
  ops.push_back({KvOp::kPut, RingKey(options_.cluster), ToJson(*next), 0});
  // Synced records of copies that joined (or were dropped) are spent.
  absl::StatusOr<ShardRing> view = ShardRing::FromRecord(*next);
  if (!view.ok()) return view.status();
  for (const auto& [key, incarnation] : state->inputs.synced) {
    const auto& joining = next->shards(key.first).joining();
    if (std::find(joining.begin(), joining.end(), key.second) == joining.end()) {
      ops.push_back({KvOp::kDelete, SyncedKey(options_.cluster, key.first, key.second), "", 0});
    }
  }
  absl::StatusOr<bool> committed =
      options_.kv->Txn({{RingKey(options_.cluster), state->ring_revision}}, ops);
  if (!committed.ok()) return committed.status();
  if (*committed) LogEvent(Who(), absl::StrCat("committed ", view->Describe()));
  return range->revision;
}

void MembershipAgent::ReportSynced(int shard) {
  std::shared_ptr<const ShardRing> ring = host_->ring();
  proto::SyncedRecord record;
  record.set_ring_version(ring ? ring->version() : 0);
  record.set_incarnation(incarnation_);
  absl::StatusOr<int64_t> put =
      options_.kv->Put(SyncedKey(options_.cluster, shard, options_.server_id), ToJson(record));
  LogEvent(Who(),
           put.ok()
               ? absl::StrCat("copy of shard ", shard, " complete; told etcd")
               : absl::StrCat("copy of shard ", shard,
                              " complete, but etcd could not be told: ", put.status().ToString()));
}

void MembershipAgent::AnnounceReturn(const std::vector<int>& shards, absl::Duration grace) {
  if (shards.empty() || grace <= absl::ZeroDuration()) return;
  proto::ReturningRecord record;
  record.set_incarnation(incarnation_);
  for (int shard : shards) record.add_shards(static_cast<uint32_t>(shard));
  absl::StatusOr<int64_t> lease = options_.kv->GrantLease(grace);
  absl::Status put = lease.status();
  if (lease.ok()) {
    put =
        options_.kv->Put(ReturningKey(options_.cluster, options_.server_id), ToJson(record), *lease)
            .status();
  }
  LogEvent(Who(), put.ok()
                      ? absl::StrCat("keeping its copies of ", shards.size(),
                                     " shard(s) on disk; their chains wait ",
                                     absl::FormatDuration(grace), " for its next process")
                      : absl::StrCat("could not tell etcd it keeps its copies: ", put.ToString(),
                                     "; their chains go to other servers"));
}

void MembershipAgent::ReportStuck(int shard, uint32_t server, uint64_t incarnation,
                                  const absl::Status& why) {
  proto::StuckRecord record;
  record.set_incarnation(incarnation);
  record.set_reporter(options_.server_id);
  record.set_reason(why.ToString());
  absl::StatusOr<int64_t> lease = options_.kv->GrantLease(options_.lease * 5);
  absl::Status put = lease.status();
  if (lease.ok()) {
    put = options_.kv->Put(StuckKey(options_.cluster, shard, server), ToJson(record), *lease)
              .status();
  }
  LogEvent(Who(), put.ok() ? absl::StrCat("reported server ", server, " stuck in shard ", shard,
                                          "'s chain; the manager takes it out")
                           : absl::StrCat("could not report server ", server, " stuck in shard ",
                                          shard, ": ", put.ToString()));
}

void MembershipAgent::Stop(bool leave) {
  int64_t lease;
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    stop_ = true;
    lease = lease_;
  }
  if (keepalive_.joinable()) keepalive_.join();
  if (watcher_.joinable()) watcher_.join();
  if (fencer_.joinable()) fencer_.join();
  if (leave && lease != 0) {
    absl::Status s = options_.kv->RevokeLease(lease);
    LogEvent(Who(), s.ok() ? "left the cluster (lease revoked)"
                           : absl::StrCat("could not revoke the lease: ", s.ToString()));
  }
}

}  // namespace ps
