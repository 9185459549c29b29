// InMemoryTransport: a Transport whose servers are PsCore objects in this
// process, for tests of the client and of exactly-once delivery without
// sockets. Faults are injected from a seeded script:
//
//   kDropRequest  done(UNAVAILABLE); the core never sees the request.
//   kDropReply    the core applies the request; done(DEADLINE_EXCEEDED)
//                 after the core has answered (the reply is lost).
//   kDelay        delivered `delay` (real time) later, from a background
//                 thread.
//   kDuplicate    delivered twice, one after the other; the first reply is
//                 reported.
//   kReorder      held back and delivered after the next request this
//                 transport handles (or after `max_hold`, real time, if none
//                 comes).
//   kFail         done(status); the core never sees the request.
//
// For each call the rules are tried in order; a rule that matches the
// method and server fires with its probability (a draw from a
// std::mt19937_64 seeded by the script), at most max_faults times. The first
// rule that fires decides; none: the call is delivered as is. Counters say
// how many faults of each kind happened.
//
// Deadlines go to the cores as given: give the cores the clients' Clock.
// Requests are copied when the call is made, so delayed and held deliveries
// do not read the caller's memory; replies are written and done runs only
// when the (last) delivery has finished. Thread-safe. The cores are not
// owned and must outlive the transport; the destructor delivers whatever is
// still delayed or held.
#ifndef PS_TESTS_IN_MEMORY_TRANSPORT_H_
#define PS_TESTS_IN_MEMORY_TRANSPORT_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/core/ps_core.h"
#include "worker/client/transport.h"

namespace ps {

enum class FaultAction { kDropRequest, kDropReply, kDelay, kDuplicate, kReorder, kFail };

struct FaultRule {
  FaultAction action = FaultAction::kDropRequest;
  double probability = 1.0;
  // "Push", "Pull", "PushPull", "PushBatch", "CreateTable", "Info", "Heartbeat",
  // "Stats"; empty: any.
  std::string method;
  int server = -1;                                                   // -1: any
  int64_t max_faults = -1;                                           // -1: no limit
  absl::Status status = absl::UnavailableError("injected failure");  // kFail
  absl::Duration delay = absl::Milliseconds(2);                      // kDelay
};

struct FaultScript {
  uint64_t seed = 1;
  std::vector<FaultRule> rules;
  // Longest a kReorder request waits for a next request.
  absl::Duration max_hold = absl::Milliseconds(5);
};

struct FaultCounters {
  int64_t calls = 0;  // every call made, faulty or not
  int64_t dropped_requests = 0;
  int64_t dropped_replies = 0;
  int64_t delayed = 0;
  int64_t duplicated = 0;
  int64_t reordered = 0;
  int64_t failed = 0;
  // Faults per "method server": e.g. faults_by_target["Push 1"].
  std::map<std::string, int64_t> faults_by_target;

  // How many times `action` happened.
  int64_t Count(FaultAction action) const {
    switch (action) {
      case FaultAction::kDropRequest:
        return dropped_requests;
      case FaultAction::kDropReply:
        return dropped_replies;
      case FaultAction::kDelay:
        return delayed;
      case FaultAction::kDuplicate:
        return duplicated;
      case FaultAction::kReorder:
        return reordered;
      case FaultAction::kFail:
        return failed;
    }
    return 0;
  }
};

class InMemoryTransport final : public Transport {
 public:
  explicit InMemoryTransport(std::vector<PsCore*> cores, FaultScript script = {});
  ~InMemoryTransport() override;

  // Replaces the rules and reseeds; fault counts of max_faults restart.
  void SetScript(FaultScript script);
  FaultCounters counters() const;

  int num_servers() const override { return static_cast<int>(cores_.size()); }
  std::string ServerName(int server) const override;

  void Push(int server, const proto::PushRequest& header,
            absl::Span<const absl::string_view> value_pieces, absl::Time deadline,
            proto::PushResponse* reply, Done done) override;
  void Pull(int server, const proto::PullRequest& request, absl::Time deadline,
            proto::PullResponse* reply_header, ConsumeValues consume_values, Done done) override;
  void PushPull(int server, const proto::PushPullRequest& header,
                absl::Span<const absl::string_view> value_pieces, absl::Time deadline,
                proto::PushPullResponse* reply_header, ConsumeValues consume_values,
                Done done) override;
  void PushBatch(int server, const proto::PushBatchRequest& request, absl::Time deadline,
                 proto::PushBatchResponse* reply, Done done) override;
  void CreateTable(int server, const proto::CreateTableRequest& request, absl::Time deadline,
                   proto::CreateTableResponse* reply, Done done) override;
  void Info(int server, const proto::InfoRequest& request, absl::Time deadline, bool wait_for_ready,
            proto::InfoResponse* reply, Done done) override;
  void Heartbeat(int server, const proto::HeartbeatRequest& request, absl::Time deadline,
                 proto::HeartbeatResponse* reply, Done done) override;
  void Stats(int server, const proto::StatsRequest& request, absl::Time deadline,
             proto::StatsResponse* reply, Done done) override;
  void VectorOps(int server, const proto::VectorOpsRequest& request, absl::Time deadline,
                 proto::VectorOpsResponse* reply, Done done) override;
  // The progress board is the gRPC service's, not a core's: UNIMPLEMENTED.
  void ReportProgress(int, const proto::ReportProgressRequest&, absl::Time,
                      proto::ReportProgressResponse*, Done done) override {
    done(absl::UnimplementedError("ReportProgress: not served by a bare core"));
  }

  // What one delivery to a core produced: `commit` hands it to the caller
  // (writes the reply, runs consume_values) and returns the call's status.
  struct Outcome {
    std::function<absl::Status()> commit;
  };
  // Delivers the request to its core once (each call with fresh state) and
  // passes the outcome on, on any thread.
  using Attempt = std::function<void(std::function<void(Outcome)>)>;

 private:
  // Picks the fault for a call (none: deliver as is) and counts it.
  std::optional<FaultRule> PickFault(const char* method, int server);
  // Runs `attempt` under the fault the script picks for this call.
  void Dispatch(const char* method, int server, Attempt attempt, Done done);
  // Delivers the requests held by kReorder.
  void ReleaseHeld();
  void BackgroundLoop();

  const std::vector<PsCore*> cores_;

  mutable absl::Mutex mu_;
  FaultScript script_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> fired_ ABSL_GUARDED_BY(mu_);  // per rule
  FaultCounters counters_ ABSL_GUARDED_BY(mu_);
  // Delayed deliveries by due time (real), and held ones with their
  // release-by time.
  std::multimap<absl::Time, std::function<void()>> delayed_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<absl::Time, std::function<void()>>> held_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread background_;
};

}  // namespace ps

#endif  // PS_TESTS_IN_MEMORY_TRANSPORT_H_
