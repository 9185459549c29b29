// PsCoreTest: a PsCore on a fake clock, and helpers to push, pull and
// heartbeat through it synchronously (testonly; ps_core_test and
// ps_core_replication_test).
#ifndef PS_SERVER_CORE_PS_CORE_FIXTURE_H_
#define PS_SERVER_CORE_PS_CORE_FIXTURE_H_

#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/value_encoding.h"
#include "common/wire.h"
#include "gtest/gtest.h"
#include "server/core/ps_core.h"
#include "server/core/ps_core_test_peer.h"
#include "tests/test_util/table_defs.h"

namespace ps {

class PsCoreTest : public ::testing::Test {
 protected:
  PsCoreTest() { Reset({}); }

  void Reset(ServerLimits limits) {
    PsCoreOptions options;
    options.limits = limits;
    options.clock = &clock_;
    options.address = "test:0";
    core_ = std::make_unique<PsCore>(options);
  }

  // Push synchronously (non-BSP); returns the reply or error.
  absl::StatusOr<proto::PushResponse> Push(proto::PushRequest req) {
    PushArgs args;
    if (absl::Status s = DecodePush(req, &core_->key_lists(), &args); !s.ok()) return s;
    std::optional<absl::StatusOr<proto::PushResponse>> result;
    core_->Push(&args, clock_.Now() + absl::Seconds(10),
                [&result](absl::StatusOr<proto::PushResponse> r) { result = std::move(r); });
    EXPECT_TRUE(result.has_value()) << "a non-BSP push completes at once";
    return *result;
  }

  proto::PushRequest OnePush(const std::string& table, uint64_t key, float grad, uint64_t id) {
    proto::PushRequest req;
    req.set_table(table);
    proto::KeyRange* r = req.add_ranges();
    r->set_begin(key);
    r->set_end(key + 1);
    req.set_values(std::string(reinterpret_cast<const char*>(&grad), sizeof(float)));
    req.set_worker_id(1);
    req.set_request_id(id);
    return req;
  }

  struct PullResult {
    std::optional<absl::StatusOr<proto::PullResponse>> reply;
    std::string values;
  };
  // Starts a pull; the result fills in when it completes.
  PsCore::CallId StartPull(const PullArgs* args, PullResult* out) {
    return core_->Pull(
        args, clock_.Now() + absl::Seconds(10),
        [out](size_t n) {
          out->values.resize(n);
          return out->values.data();
        },
        [out](absl::StatusOr<proto::PullResponse> r) { out->reply = std::move(r); });
  }

  // A BSP pull by worker 1 at clock 5 of table "w": parks until every live
  // worker has completed rounds 0..4.
  static PullArgs PullThatWaits() {
    proto::PullRequest pull;
    pull.set_table("w");
    pull.set_worker_id(1);
    pull.set_clock(5);
    pull.set_consistency(proto::CONSISTENCY_BOUNDED);
    pull.add_ranges()->set_end(4);
    PullArgs args;
    EXPECT_TRUE(DecodePull(pull, nullptr, &args).ok());
    return args;
  }

  absl::StatusOr<proto::HeartbeatResponse> Heartbeat(uint32_t worker, uint64_t incarnation,
                                                     uint32_t lease_ms = 1000) {
    proto::HeartbeatRequest req;
    req.set_worker_id(worker);
    req.set_incarnation(incarnation);
    req.set_lease_ms(lease_ms);
    return core_->Heartbeat(req);
  }

  FakeClock clock_;
  std::unique_ptr<PsCore> core_;
};

}  // namespace ps

#endif  // PS_SERVER_CORE_PS_CORE_FIXTURE_H_
