#include "server/core/ps_core.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/table_def.h"
#include "common/value_encoding.h"
#include "server/core/encoded_read.h"

namespace ps {
namespace {

constexpr uint64_t kNoLiveWorkers = std::numeric_limits<uint64_t>::max();

bool IsBsp(proto::Consistency consistency, uint32_t staleness) {
  return consistency == proto::CONSISTENCY_BOUNDED && staleness == 0;
}

StoreLimits StoreLimitsOf(const PsCoreOptions& options) {
  StoreLimits limits;
  limits.memory_budget_bytes = options.limits.memory_budget_bytes;
  limits.max_tables = options.limits.max_tables;
  limits.process_budget = options.process_budget;
  limits.table_dir = options.limits.table_dir;
  limits.disk_budget_bytes = options.limits.disk_budget_bytes;
  limits.process_disk_budget = options.process_disk;
  limits.tier_scratch = options.tier_scratch;
  limits.tier_reuse = options.tier_reuse;
  return limits;
}

}  // namespace

PsCore::PsCore(const PsCoreOptions& options)
    : options_(options),
      clock_(options.clock),
      store_(options.server_index, Placement(options.num_servers, options.placement),
             StoreLimitsOf(options), options.clock),
      clocks_([clock = options.clock] { return clock->Now(); }, options.limits.max_parked_calls,
              options.process_parked),
      dedup_(options.clock, options.limits.dedup_retention),
      key_lists_(options.limits.key_list_cache_bytes, options.process_key_lists),
      address_(options.address) {}

PsCore::~PsCore() = default;

void PsCore::set_address(const std::string& address) {
  absl::MutexLock lock(&address_mu_);
  address_ = address;
}

std::string PsCore::LogPrefix() const {
  absl::MutexLock lock(&address_mu_);
  return absl::StrCat("ps_server ", options_.server_index, " ", address_);
}

absl::StatusOr<proto::CreateTableResponse> PsCore::CreateTable(
    const proto::CreateTableRequest& request) {
  const proto::TableDef& def = request.table();
  if (def.name().size() > options_.limits.max_table_name_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("table name '", def.name().substr(0, 64), "...' is ", def.name().size(),
                     " bytes, over the limit of ", options_.limits.max_table_name_bytes,
                     " (ps_server --max_table_name_bytes)"));
  }
  absl::StatusOr<bool> created;
  {
    absl::MutexLockMaybe order(log_ != nullptr ? &order_mu_ : nullptr);
    if (absl::Status s = CheckWritable(); !s.ok()) return s;
    created = store_.CreateTable(def);
    if (!created.ok()) return created.status();
    if (*created && log_ != nullptr) {
      proto::ForwardEntry entry;
      *entry.mutable_create_table() = request;
      log_->Append(std::move(entry));
    }
  }
  if (*created) LogEvent(LogPrefix(), absl::StrCat("table created: ", TableDefSummary(def)));
  proto::CreateTableResponse reply;
  reply.set_created(*created);
  return reply;
}

absl::Status PsCore::CheckClock(const std::string& what, uint64_t clock) const {
  if (clock < options_.limits.max_clock) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " carries clock ", clock, ", at or over the limit of ",
                   options_.limits.max_clock, " (ps_server --max_clock)"));
}

absl::Status PsCore::CheckPush(const PushArgs& args) const {
  const proto::PushRequest& h = args.header;
  if (absl::Status s = CheckClock(absl::StrCat("push to table '", h.table(), "'"), h.clock());
      !s.ok()) {
    return s;
  }
  // An unknown table is refused before anything (clocks, dedup) is touched.
  if (absl::Status s = store_.GetTableDef(h.table()).status(); !s.ok()) return s;
  return CheckRequestSize("push", h.table(), args.keys.size(), args.values.size() * sizeof(float),
                          options_.limits);
}

absl::StatusOr<proto::PushResponse> PsCore::Apply(const PushArgs& args) {
  absl::MutexLockMaybe order(log_ != nullptr ? &order_mu_ : nullptr);
  if (absl::Status s = CheckWritable(); !s.ok()) return s;
  return ApplyLocked(args, nullptr);
}

absl::StatusOr<proto::PushResponse> PsCore::ApplyLocked(const PushArgs& args,
                                                        const proto::ForwardEntry* forwarded) {
  const proto::PushRequest& h = args.header;
  auto admit = [this, &h] { return dedup_.Admit(h.worker_id(), h.request_id(), h.clock()); };
  proto::PushResponse reply;
  SparseTable::Decisions decisions;
  if (args.clock_only) {
    absl::StatusOr<bool> fresh = admit();
    if (!fresh.ok()) return fresh.status();
    reply.set_duplicate(!*fresh);
  } else {
    const absl::Time start = absl::Now();
    // Replicated: the primary records its sparse decisions, a copy replays
    // the primary's.
    if (forwarded != nullptr) {
      decisions.replay = true;
      decisions.refused.assign(forwarded->decisions().refused().begin(),
                               forwarded->decisions().refused().end());
      decisions.evicted.assign(forwarded->decisions().evicted().begin(),
                               forwarded->decisions().evicted().end());
    }
    auto result = store_.Push(h.table(), args.keys, args.values, h.clock(), admit,
                              StoreOptions(h, log_ != nullptr ? &decisions : nullptr));
    if (!result.ok()) return result.status();
    reply.set_duplicate(result->duplicate);
    reply.set_version(result->version);
    if (!result->duplicate) apply_seconds_.Observe(absl::ToDoubleSeconds(absl::Now() - start));
  }
  if (!reply.duplicate()) {
    clocks_.PushApplied(h.table(), h.worker_id(), h.clock(), h.round_parts());
  }
  // A forwarded entry takes its place in this copy's history whether or
  // not it was new here (every copy's history is the primary's).
  if (forwarded != nullptr) {
    log_->Append(*forwarded);
  } else if (!reply.duplicate() && log_ != nullptr) {
    log_->Append(ForwardEntryOf(args, decisions));
  }
  return reply;
}

PsCore::CallId PsCore::Push(const PushArgs* args, absl::Time deadline, PushDone done) {
  if (absl::Status s = CheckPush(*args); !s.ok()) {
    done(s);
    return 0;
  }
  const proto::PushRequest& h = args->header;
  if (h.has_reduce()) {
    if (absl::Status s = CheckReduce(*args); !s.ok()) {
      done(s);
      return 0;
    }
  }
  if (!IsBsp(h.consistency(), h.staleness())) {
    done(Apply(*args));
    return 0;
  }
  // BSP: apply (or, reduced, hold for the round) once everyone has read
  // this round's parameters.
  return clocks_.WhenPushReady(
      h.table(), h.worker_id(), h.clock(), deadline,
      [this, args, deadline, done = std::move(done)](absl::Status status, uint64_t) {
        if (!status.ok()) {
          done(status);
        } else if (args->header.has_reduce()) {
          HoldForRound(args, deadline, done);
        } else {
          done(Apply(*args));
        }
      });
}

absl::Status PsCore::CheckReduce(const PushArgs& args) const {
  const proto::PushRequest& h = args.header;
  absl::StatusOr<proto::TableDef> def = store_.GetTableDef(h.table());
  if (!def.ok()) return def.status();
  return RoundReducer::CheckPush(args, *def, IsBsp(h.consistency(), h.staleness()),
                                 log_ != nullptr);
}

void PsCore::HoldForRound(const PushArgs* args, absl::Time deadline, PushDone done) {
  const proto::PushRequest& h = args->header;
  absl::StatusOr<bool> fresh = dedup_.IsNew(h.worker_id(), h.request_id());
  if (!fresh.ok()) return done(fresh.status());
  if (!*fresh) {  // a retry of a push whose round was applied
    proto::PushResponse reply;
    reply.set_duplicate(true);
    return done(reply);
  }
  std::optional<RoundReducer::Round> round =
      reducer_.Add(args, deadline, std::move(done), clocks_.LiveWorkers());
  if (round.has_value()) ApplyRound(*std::move(round));
}

void PsCore::ApplyRound(RoundReducer::Round round) {
  absl::StatusOr<std::vector<RoundReducer::Sum>> sums = RoundReducer::SumRound(round);
  absl::flat_hash_map<const RoundReducer::Held*, absl::StatusOr<proto::PushResponse>> replies;
  for (const RoundReducer::Sum& sum : sums.ok() ? *sums : std::vector<RoundReducer::Sum>()) {
    // One step with the sum; every push summed is recorded as applied.
    auto admit = [this, &sum]() -> absl::StatusOr<bool> {
      for (const RoundReducer::Held* held : sum.pushes) {
        const proto::PushRequest& h = held->args->header;
        absl::StatusOr<bool> fresh = dedup_.Admit(h.worker_id(), h.request_id(), h.clock());
        if (!fresh.ok()) return fresh.status();
      }
      return true;
    };
    auto result = store_.Push(round.table, sum.keys, sum.values, round.clock, admit);
    absl::StatusOr<proto::PushResponse> reply = proto::PushResponse();
    if (!result.ok()) reply = result.status();
    if (reply.ok()) reply->set_version(result->version);
    for (const RoundReducer::Held* held : sum.pushes) replies.emplace(held, reply);
  }
  for (RoundReducer::Held& held : round.pushes) {
    const proto::PushRequest& h = held.args->header;
    absl::StatusOr<proto::PushResponse> reply = proto::PushResponse();
    if (!sums.ok()) {
      reply = sums.status();
    } else if (auto it = replies.find(&held); it != replies.end()) {
      reply = it->second;
    } else if (absl::StatusOr<bool> fresh = dedup_.Admit(h.worker_id(), h.request_id(), h.clock());
               !fresh.ok()) {
      reply = fresh.status();  // a clock-only part
    }
    if (reply.ok()) clocks_.PushApplied(h.table(), h.worker_id(), h.clock(), h.round_parts());
    for (PushDone& done : held.dones) done(reply);
  }
}

proto::PushBatchResponse PsCore::PushBatch(const proto::PushBatchRequest& request) {
  proto::PushBatchResponse response;
  for (const proto::PushRequest& push : request.pushes()) {
    absl::StatusOr<proto::PushResponse> reply;
    PushArgs args;
    if (IsBsp(push.consistency(), push.staleness())) {
      reply = absl::InvalidArgumentError(
          absl::StrCat("push to table '", push.table(),
                       "': BSP pushes wait for other workers and cannot be batched"));
    } else if (absl::Status s = DecodePush(push, SegmentedBytes::Of(push.key_list()),
                                           SegmentedBytes::Of(push.values()), &key_lists_, &args);
               !s.ok()) {
      reply = s;
    } else if (absl::Status c = CheckPush(args); !c.ok()) {
      reply = c;
    } else {
      reply = Apply(args);
    }
    proto::PushResponse* out = response.add_results();
    if (reply.ok()) {
      *out = *std::move(reply);
    } else {
      out->set_code(static_cast<int32_t>(reply.status().code()));
      out->set_message(std::string(reply.status().message()));
    }
  }
  return response;
}

absl::Status PsCore::CheckPull(const PullArgs& args) const {
  const proto::PullRequest& h = args.header;
  if (absl::Status s = CheckClock(absl::StrCat("pull of table '", h.table(), "'"), h.clock());
      !s.ok()) {
    return s;
  }
  absl::StatusOr<proto::TableDef> def = store_.GetTableDef(h.table());
  if (!def.ok()) return def.status();
  if (absl::Status s =
          CheckValueEncoding(h.value_encoding(), absl::StrCat("pull of table '", h.table(), "'"));
      !s.ok()) {
    return s;
  }
  const long double bytes =
      static_cast<long double>(args.keys.size()) * def->width() * sizeof(float);
  return CheckRequestSize("pull", h.table(), args.keys.size(),
                          bytes > 0x1p63L ? ~uint64_t{0} : static_cast<uint64_t>(bytes),
                          options_.limits);
}

PsCore::CallId PsCore::Pull(const PullArgs* args, absl::Time deadline, Allocate allocate,
                            PullDone done) {
  const absl::Time arrived = clock_->Now();
  if (absl::Status s = CheckPull(*args); !s.ok()) {
    done(s);
    return 0;
  }
  const proto::PullRequest& h = args->header;
  auto serve = [this, args, arrived, allocate = std::move(allocate), done = std::move(done)](
                   absl::Status status, uint64_t params_clock) {
    proto::PullResponse reply;
    if (status.ok()) {
      status = Serve(*args, params_clock, arrived, allocate, &reply);
    }
    if (status.ok()) {
      done(std::move(reply));
    } else {
      done(status);
    }
  };
  if (h.consistency() == proto::CONSISTENCY_ASYNC) {
    serve(absl::OkStatus(), clocks_.ParamsClock(h.table()));
    return 0;
  }
  return clocks_.WhenPullReady(h.table(), h.worker_id(), h.clock(), h.staleness(), deadline,
                               std::move(serve));
}

void PsCore::PushPull(const PushArgs* args, Allocate allocate, PullDone done) {
  const proto::PushRequest& h = args->header;
  if (h.consistency() != proto::CONSISTENCY_ASYNC) {
    done(absl::InvalidArgumentError(absl::StrCat(
        "PushPull of table '", h.table(),
        "' needs async consistency (a bounded or BSP round waits between its push and its "
        "pull); use Push and Pull")));
    return;
  }
  if (args->clock_only) {
    done(absl::InvalidArgumentError(
        absl::StrCat("PushPull of table '", h.table(), "' names no keys")));
    return;
  }
  if (absl::Status s = CheckPush(*args); !s.ok()) {
    done(s);
    return;
  }
  // Applied and read back under one lock per run (ShardStore::PushAndRead).
  auto admit = [this, &h] { return dedup_.Admit(h.worker_id(), h.request_id(), h.clock()); };
  absl::StatusOr<ShardStore::PushResult> pushed;
  {
    absl::MutexLockMaybe order(log_ != nullptr ? &order_mu_ : nullptr);
    SparseTable::Decisions decisions;
    if (absl::Status writable = CheckWritable(); !writable.ok()) {
      pushed = writable;  // answered below, outside the lock
    } else {
      pushed =
          ReadEncoded(h.value_encoding(), allocate, [&](absl::FunctionRef<char*(size_t)> room) {
            return store_.PushAndRead(h.table(), args->keys, args->values, h.clock(), admit, room,
                                      StoreOptions(h, log_ != nullptr ? &decisions : nullptr));
          });
    }
    if (pushed.ok() && !pushed->duplicate) {
      clocks_.PushApplied(h.table(), h.worker_id(), h.clock(), h.round_parts());
      if (log_ != nullptr) log_->Append(ForwardEntryOf(*args, decisions));
    }
  }
  if (!pushed.ok()) {
    done(pushed.status());
    return;
  }
  // The worker has now pushed rounds 0..clock: it reads at clock + 1.
  proto::PullRequest pull;
  pull.set_table(h.table());
  pull.set_worker_id(h.worker_id());
  pull.set_clock(h.clock() + 1);
  proto::PullResponse reply;
  // An async read never waits: no wait is recorded.
  RecordRead(pull, clocks_.ParamsClock(h.table()), clock_->Now(), pushed->version, &reply);
  reply.set_duplicate(pushed->duplicate);
  done(std::move(reply));
}

absl::StatusOr<proto::PushPullResponse> PsCore::PushPullMany(const proto::PushPullRequest& request,
                                                             const SegmentedBytes& values,
                                                             const Allocate& allocate) {
  uint64_t total = 0;
  for (const proto::PushRequest& push : request.pushes()) {
    if (push.values_bytes() > values.size() - std::min<uint64_t>(total, values.size())) {
      total = values.size() + 1;  // does not add up
      break;
    }
    total += push.values_bytes();
  }
  if (total != values.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PushPull of ", request.pushes_size(), " pushes: their values_bytes do not add up to the ",
        values.size(), " bytes of values sent"));
  }
  char* const out = allocate(total);
  proto::PushPullResponse response;
  uint64_t offset = 0;
  for (const proto::PushRequest& push : request.pushes()) {
    const uint64_t n = push.values_bytes();
    PushArgs args;
    absl::StatusOr<proto::PullResponse> result;
    absl::Status decoded = DecodePush(push, SegmentedBytes::Of(push.key_list()),
                                      values.Sub(offset, n), &key_lists_, &args);
    if (!decoded.ok()) {
      result = decoded;
    } else {
      char* const region = out + offset;
      PushPull(
          &args,
          [region, n](size_t bytes) -> char* {
            // Validation made the values read back as large as those pushed.
            return bytes == n ? region : nullptr;
          },
          [&result](absl::StatusOr<proto::PullResponse> r) { result = std::move(r); });
    }
    proto::PullResponse* reply = response.add_results();
    if (result.ok()) {
      *reply = *std::move(result);
    } else {
      reply->set_code(static_cast<int32_t>(result.status().code()));
      reply->set_message(std::string(result.status().message()));
      if (n > 0) std::memset(out + offset, 0, n);
    }
    offset += n;
  }
  return response;
}

absl::Status PsCore::Serve(const PullArgs& args, uint64_t params_clock, absl::Time arrived,
                           const Allocate& allocate, proto::PullResponse* reply) {
  const proto::PullRequest& h = args.header;
  if (args.clock_only) {
    RecordRead(h, params_clock, arrived, 0, reply);
    return absl::OkStatus();
  }
  auto version =
      ReadEncoded(h.value_encoding(), allocate, [&](absl::FunctionRef<char*(size_t)> room) {
        return store_.Pull(h.table(), args.keys, room);
      });
  if (!version.ok()) return version.status();
  RecordRead(h, params_clock, arrived, *version, reply);
  return absl::OkStatus();
}

void PsCore::RecordRead(const proto::PullRequest& h, uint64_t params_clock, absl::Time arrived,
                        uint64_t version, proto::PullResponse* reply) {
  const absl::Duration waited = clock_->Now() - arrived;
  clocks_.PullServed(h.table(), h.worker_id(), h.clock());
  // Without live workers nothing is tracked: the parameters are current.
  // Staleness as the server sees it: its clock for the table (the furthest
  // any worker has completed) minus the clock of the parameters returned.
  const uint64_t server_clock = clocks_.ServerClock(h.table());
  const uint64_t clock =
      params_clock == kNoLiveWorkers ? std::max(h.clock(), server_clock) : params_clock;
  stats_.Record(h.table(), server_clock > clock ? server_clock - clock : 0, waited);
  reply->set_version(version);
  reply->set_params_clock(clock);
  reply->set_wait_us(static_cast<uint64_t>(absl::ToInt64Microseconds(waited)));
}

void PsCore::Cancel(CallId id) { clocks_.Cancel(id); }

absl::StatusOr<proto::HeartbeatResponse> PsCore::Heartbeat(const proto::HeartbeatRequest& request) {
  absl::StatusOr<proto::HeartbeatResponse> reply = TakeHeartbeat(request);
  if (reply.ok() && log_ != nullptr) {
    // Taken first, appended after: taking it may run parked calls, which
    // take the order lock themselves.
    proto::ForwardEntry entry;
    *entry.mutable_heartbeat() = request;
    absl::MutexLock order(&order_mu_);
    // Not the primary (any longer): the worker heartbeats the new one.
    if (absl::Status s = CheckWritable(); !s.ok()) return s;
    log_->Append(std::move(entry));
  }
  return reply;
}

absl::StatusOr<proto::HeartbeatResponse> PsCore::TakeHeartbeat(
    const proto::HeartbeatRequest& request) {
  proto::HeartbeatResponse reply;
  if (request.leaving()) {
    clocks_.Leave(request.worker_id(), request.incarnation());
    return reply;
  }
  const absl::Duration lease =
      request.lease_ms() > 0 ? absl::Milliseconds(request.lease_ms()) : absl::Seconds(5);
  if (lease > options_.limits.max_lease) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", request.worker_id(), " asks for a lease of ", absl::FormatDuration(lease),
        ", over this server's limit of ", absl::FormatDuration(options_.limits.max_lease),
        " (ps_server --max_lease_seconds); use a shorter ps_worker --lease_seconds"));
  }
  if (absl::Status s =
          CheckClock(absl::StrCat("heartbeat of worker ", request.worker_id()), request.clock());
      !s.ok()) {
    return s;
  }
  absl::StatusOr<int> live =
      clocks_.Register(request.worker_id(), request.incarnation(), request.clock(), lease);
  if (!live.ok()) return live.status();
  reply.set_live_workers(*live);
  return reply;
}

void PsCore::FailWaiting(const absl::Status& why) {
  clocks_.FailWaiting(why);
  reducer_.FailAll(why);
}

std::vector<std::string> PsCore::Tick() {
  clocks_.Tick();
  // Rounds that a lease's end completed, after the held pushes past their
  // deadline failed.
  for (RoundReducer::Round& round : reducer_.Tick(clocks_.LiveWorkers(), clock_->Now())) {
    ApplyRound(std::move(round));
  }
  dedup_.Expire();
  if (log_ == nullptr) {
    store_.Sweep();
  } else {
    // The primary evicts aged rows and sends its copies the keys; a copy
    // evicts only what its primary did. Asked under the order lock, under
    // which the copy's role changes.
    absl::MutexLock order(&order_mu_);
    std::vector<std::pair<std::string, std::vector<uint64_t>>> evicted;
    if (log_->Decides()) store_.Sweep(&evicted);
    constexpr size_t kKeysPerEntry = 1 << 16;  // 512 KiB: far below any message limit
    for (auto& [table, keys] : evicted) {
      for (size_t b = 0; b < keys.size(); b += kKeysPerEntry) {
        const size_t e = std::min(keys.size(), b + kKeysPerEntry);
        proto::ForwardEntry entry;
        entry.mutable_evict()->set_table(table);
        entry.mutable_evict()->mutable_keys()->Assign(keys.begin() + b, keys.begin() + e);
        log_->Append(std::move(entry));
      }
    }
  }
  return clocks_.TakeEvents();
}

void PsCore::Close(const absl::Status& status) {
  clocks_.Close(status);
  reducer_.FailAll(status);
}

}  // namespace ps
