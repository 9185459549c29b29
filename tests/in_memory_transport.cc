#include "tests/in_memory_transport.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/core/request_args.h"

namespace ps {

namespace {

using Outcome = InMemoryTransport::Outcome;
using Attempt = InMemoryTransport::Attempt;

Outcome Failed(absl::Status status) {
  return Outcome{[status = std::move(status)] { return status; }};
}

// The outcome of a reply (or error) that is copied to *reply on commit.
template <typename Response>
Outcome Reply(absl::StatusOr<Response> result, Response* reply) {
  auto shared = std::make_shared<absl::StatusOr<Response>>(std::move(result));
  return Outcome{[shared, reply] {
    if (!shared->ok()) return shared->status();
    *reply = **shared;
    return absl::OkStatus();
  }};
}

// An attempt for a core method that answers at once.
template <typename Response, typename Call>
Attempt SyncAttempt(Response* reply, Call call) {
  return [reply, call](std::function<void(Outcome)> then) { then(Reply<Response>(call(), reply)); };
}

}  // namespace

InMemoryTransport::InMemoryTransport(std::vector<PsCore*> cores, FaultScript script)
    : cores_(std::move(cores)) {
  SetScript(std::move(script));
  background_ = std::thread([this] { BackgroundLoop(); });
}

InMemoryTransport::~InMemoryTransport() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  background_.join();
}

void InMemoryTransport::SetScript(FaultScript script) {
  absl::MutexLock lock(&mu_);
  rng_.seed(script.seed);
  fired_.assign(script.rules.size(), 0);
  script_ = std::move(script);
}

FaultCounters InMemoryTransport::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

std::string InMemoryTransport::ServerName(int server) const {
  return absl::StrCat("server ", server, " (in-memory)");
}

std::optional<FaultRule> InMemoryTransport::PickFault(const char* method, int server) {
  absl::MutexLock lock(&mu_);
  ++counters_.calls;
  for (size_t i = 0; i < script_.rules.size(); ++i) {
    const FaultRule& rule = script_.rules[i];
    if (!rule.method.empty() && rule.method != method) continue;
    if (rule.server >= 0 && rule.server != server) continue;
    if (rule.max_faults >= 0 && fired_[i] >= rule.max_faults) continue;
    if (std::uniform_real_distribution<double>(0, 1)(rng_) >= rule.probability) continue;
    ++fired_[i];
    ++counters_.faults_by_target[absl::StrCat(method, " ", server)];
    switch (rule.action) {
      case FaultAction::kDropRequest:
        ++counters_.dropped_requests;
        break;
      case FaultAction::kDropReply:
        ++counters_.dropped_replies;
        break;
      case FaultAction::kDelay:
        ++counters_.delayed;
        break;
      case FaultAction::kDuplicate:
        ++counters_.duplicated;
        break;
      case FaultAction::kReorder:
        ++counters_.reordered;
        break;
      case FaultAction::kFail:
        ++counters_.failed;
        break;
    }
    return rule;
  }
  return std::nullopt;
}

void InMemoryTransport::Dispatch(const char* method, int server, Attempt attempt, Done done) {
  const std::optional<FaultRule> rule = PickFault(method, server);
  auto deliver = [attempt, done] { attempt([done](Outcome outcome) { done(outcome.commit()); }); };
  if (!rule.has_value()) {
    deliver();
  } else {
    const std::string where = absl::StrCat(method, " to ", ServerName(server));
    switch (rule->action) {
      case FaultAction::kDropRequest:
        done(absl::UnavailableError(absl::StrCat("injected: request dropped (", where, ")")));
        break;
      case FaultAction::kFail:
        done(rule->status);
        break;
      case FaultAction::kDropReply:
        attempt([done, where](Outcome) {
          done(absl::DeadlineExceededError(
              absl::StrCat("injected: reply dropped after the server applied it (", where, ")")));
        });
        break;
      case FaultAction::kDuplicate:
        attempt([attempt, done](Outcome first) {
          attempt([first, done](Outcome) { done(first.commit()); });
        });
        break;
      case FaultAction::kDelay: {
        absl::MutexLock lock(&mu_);
        delayed_.emplace(absl::Now() + rule->delay, std::move(deliver));
        return;  // held ones go after the next undelayed delivery
      }
      case FaultAction::kReorder: {
        absl::MutexLock lock(&mu_);
        held_.emplace_back(absl::Now() + script_.max_hold, std::move(deliver));
        return;
      }
    }
  }
  ReleaseHeld();
}

void InMemoryTransport::ReleaseHeld() {
  std::deque<std::pair<absl::Time, std::function<void()>>> held;
  {
    absl::MutexLock lock(&mu_);
    held.swap(held_);
  }
  for (auto& [unused, deliver] : held) deliver();
}

void InMemoryTransport::BackgroundLoop() {
  while (true) {
    std::vector<std::function<void()>> due;
    bool stop = false;
    {
      absl::MutexLock lock(&mu_);
      auto next = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        absl::Time t = absl::InfiniteFuture();
        if (!delayed_.empty()) t = std::min(t, delayed_.begin()->first);
        if (!held_.empty()) t = std::min(t, held_.front().first);
        return t;
      };
      // Wakes for a new entry (which may be due earlier), a due one, or stop.
      const size_t seen = delayed_.size() + held_.size();
      auto wake = [this, seen, &next]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || delayed_.size() + held_.size() != seen || next() <= absl::Now();
      };
      mu_.AwaitWithDeadline(absl::Condition(&wake), next());
      const absl::Time now = absl::Now();
      stop = stopping_;
      while (!delayed_.empty() && (stop || delayed_.begin()->first <= now)) {
        due.push_back(std::move(delayed_.begin()->second));
        delayed_.erase(delayed_.begin());
      }
      while (!held_.empty() && (stop || held_.front().first <= now)) {
        due.push_back(std::move(held_.front().second));
        held_.pop_front();
      }
    }
    for (auto& deliver : due) deliver();
    if (stop) return;
  }
}

void InMemoryTransport::Push(int server, const proto::PushRequest& header,
                             absl::Span<const absl::string_view> value_pieces, absl::Time deadline,
                             proto::PushResponse* reply, Done done) {
  auto request = std::make_shared<proto::PushRequest>(header);
  std::string* values = request->mutable_values();
  for (absl::string_view piece : value_pieces) values->append(piece.data(), piece.size());
  PsCore* core = cores_[server];
  Attempt attempt = [core, request, deadline, reply](std::function<void(Outcome)> then) {
    // Decoded views point into *request; both live until the core's done.
    auto args = std::make_shared<PushArgs>();
    if (absl::Status s = DecodePush(*request, &core->key_lists(), args.get()); !s.ok()) {
      then(Failed(s));
      return;
    }
    PushArgs* raw = args.get();
    core->Push(
        raw, deadline,
        [args = std::move(args), request, reply, then](absl::StatusOr<proto::PushResponse> result) {
          then(Reply<proto::PushResponse>(std::move(result), reply));
        });
  };
  Dispatch("Push", server, std::move(attempt), std::move(done));
}

namespace {

// The outcome of a pull or push-pull: on success, the reply header without
// its values, then the values handed to `consume`.
template <typename Reply>
InMemoryTransport::Outcome ValuesOutcome(absl::StatusOr<Reply> result,
                                         std::shared_ptr<std::string> values, Reply* reply_header,
                                         Transport::ConsumeValues consume) {
  auto shared = std::make_shared<absl::StatusOr<Reply>>(std::move(result));
  return InMemoryTransport::Outcome{[shared, values, reply_header, consume] {
    if (!shared->ok()) return shared->status();
    *reply_header = **shared;
    reply_header->clear_values();
    return consume(SegmentedBytes::Of(*values));
  }};
}

// Where the core writes a pull's values.
PsCore::Allocate AllocateInto(const std::shared_ptr<std::string>& values) {
  return [values](size_t bytes) {
    values->resize(bytes);
    return values->data();
  };
}

}  // namespace

void InMemoryTransport::Pull(int server, const proto::PullRequest& request, absl::Time deadline,
                             proto::PullResponse* reply_header, ConsumeValues consume_values,
                             Done done) {
  auto copy = std::make_shared<proto::PullRequest>(request);
  PsCore* core = cores_[server];
  Attempt attempt = [core, copy, deadline, reply_header,
                     consume = std::move(consume_values)](std::function<void(Outcome)> then) {
    auto args = std::make_shared<PullArgs>();
    if (absl::Status s = DecodePull(*copy, &core->key_lists(), args.get()); !s.ok()) {
      then(Failed(s));
      return;
    }
    auto values = std::make_shared<std::string>();
    PullArgs* raw = args.get();
    core->Pull(raw, deadline, AllocateInto(values),
               [args = std::move(args), copy, values, reply_header, consume,
                then](absl::StatusOr<proto::PullResponse> result) {
                 then(ValuesOutcome(std::move(result), values, reply_header, consume));
               });
  };
  Dispatch("Pull", server, std::move(attempt), std::move(done));
}

void InMemoryTransport::PushPull(int server, const proto::PushPullRequest& header,
                                 absl::Span<const absl::string_view> value_pieces, absl::Time,
                                 proto::PushPullResponse* reply_header,
                                 ConsumeValues consume_values, Done done) {
  auto request = std::make_shared<proto::PushPullRequest>(header);
  auto pushed = std::make_shared<std::string>();
  for (absl::string_view piece : value_pieces) pushed->append(piece.data(), piece.size());
  PsCore* core = cores_[server];
  Attempt attempt = [core, request, pushed, reply_header,
                     consume = std::move(consume_values)](std::function<void(Outcome)> then) {
    auto values = std::make_shared<std::string>();
    then(ValuesOutcome(
        core->PushPullMany(*request, SegmentedBytes::Of(*pushed), AllocateInto(values)), values,
        reply_header, consume));
  };
  Dispatch("PushPull", server, std::move(attempt), std::move(done));
}

void InMemoryTransport::PushBatch(int server, const proto::PushBatchRequest& request,
                                  absl::Time deadline, proto::PushBatchResponse* reply, Done done) {
  auto copy = std::make_shared<proto::PushBatchRequest>(request);
  PsCore* core = cores_[server];
  Dispatch("PushBatch", server,
           SyncAttempt(reply,
                       [core, copy]() -> absl::StatusOr<proto::PushBatchResponse> {
                         return core->PushBatch(*copy);
                       }),
           std::move(done));
}

void InMemoryTransport::CreateTable(int server, const proto::CreateTableRequest& request,
                                    absl::Time deadline, proto::CreateTableResponse* reply,
                                    Done done) {
  auto copy = std::make_shared<proto::CreateTableRequest>(request);
  PsCore* core = cores_[server];
  Dispatch("CreateTable", server,
           SyncAttempt(reply, [core, copy] { return core->CreateTable(*copy); }), std::move(done));
}

void InMemoryTransport::Info(int server, const proto::InfoRequest& request, absl::Time deadline,
                             bool wait_for_ready, proto::InfoResponse* reply, Done done) {
  PsCore* core = cores_[server];
  Dispatch("Info", server,
           SyncAttempt(reply,
                       [core, request]() -> absl::StatusOr<proto::InfoResponse> {
                         return core->Info(request);
                       }),
           std::move(done));
}

void InMemoryTransport::Heartbeat(int server, const proto::HeartbeatRequest& request,
                                  absl::Time deadline, proto::HeartbeatResponse* reply, Done done) {
  auto copy = std::make_shared<proto::HeartbeatRequest>(request);
  PsCore* core = cores_[server];
  Dispatch("Heartbeat", server, SyncAttempt(reply, [core, copy] { return core->Heartbeat(*copy); }),
           std::move(done));
}

void InMemoryTransport::Stats(int server, const proto::StatsRequest& request, absl::Time deadline,
                              proto::StatsResponse* reply, Done done) {
  PsCore* core = cores_[server];
  Dispatch("Stats", server,
           SyncAttempt(reply,
                       [core]() -> absl::StatusOr<proto::StatsResponse> { return core->Stats(); }),
           std::move(done));
}

void InMemoryTransport::VectorOps(int server, const proto::VectorOpsRequest& request,
                                  absl::Time deadline, proto::VectorOpsResponse* reply, Done done) {
  auto copy = std::make_shared<proto::VectorOpsRequest>(request);
  PsCore* core = cores_[server];
  Dispatch("VectorOps", server, SyncAttempt(reply, [core, copy] { return core->VectorOps(*copy); }),
           std::move(done));
}

}  // namespace ps
