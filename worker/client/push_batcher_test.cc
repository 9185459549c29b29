// PushBatcher without sockets: the fake transport holds every PushBatch call
// until the test answers it, so the tests see which pushes go out together,
// when a slot frees, and what each push's done gets.
#include "worker/client/push_batcher.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/client/call_runner.h"
#include "worker/client/fake_transport.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A PushBatch call the transport received and the test has not answered.
struct HeldCall {
  int server = 0;
  std::vector<uint64_t> ids;  // request ids of its pushes, in order
  proto::PushBatchResponse* reply = nullptr;
  Transport::Done done;
};

// What a push's done got.
struct Result {
  bool ran = false;
  absl::Status status;
  uint64_t version = 0;
};

class PushBatcherTest : public ::testing::Test {
 protected:
  explicit PushBatcherTest(int max_attempts = 1) : transport_(2) {
    transport_.on_push_batch = [this](int server, const proto::PushBatchRequest& request,
                                      absl::Time, proto::PushBatchResponse* reply,
                                      Transport::Done done) {
      HeldCall call{server, {}, reply, std::move(done)};
      for (const proto::PushRequest& push : request.pushes()) call.ids.push_back(push.request_id());
      absl::MutexLock lock(&mu_);
      held_.push_back(std::move(call));
    };
    const CallPolicy policy = {absl::Seconds(10), max_attempts, absl::ZeroDuration(),
                               absl::ZeroDuration()};
    batcher_ = std::make_unique<PushBatcher>(&transport_, &runner_, policy);
  }
  // Whatever a test left in flight fails (not retryably), so that the
  // batcher's destructor, which waits for its batches, returns.
  ~PushBatcherTest() override {
    while (!Held().empty()) Answer(0, {}, absl::AbortedError("test over"));
  }

  // Submits push `id` to `server`; its done records into results_[id] and
  // then runs `then`, if given.
  void Submit(int server, uint64_t id, std::function<void()> then = nullptr) {
    auto item = std::make_unique<PushBatcher::Item>();
    item->request.set_request_id(id);
    item->request.set_values("vals");
    item->done = [this, id, then = std::move(then)](absl::Status status, uint64_t version) {
      {
        absl::MutexLock lock(&mu_);
        Result& r = results_[id];
        EXPECT_FALSE(r.ran) << "done of push " << id << " ran twice";
        r = {true, std::move(status), version};
      }
      if (then) then();
    };
    batcher_->Submit(server, std::move(item));
  }

  // The request ids of each held call, in the order they were sent.
  std::vector<std::vector<uint64_t>> Held() {
    absl::MutexLock lock(&mu_);
    std::vector<std::vector<uint64_t>> out;
    for (const HeldCall& c : held_) out.push_back(c.ids);
    return out;
  }
  // Removes held call i and answers it: OK with one result per code (a
  // nonzero code refuses that push, version 10 * id otherwise), or the
  // transport error `failure`.
  void Answer(size_t i, std::vector<int> codes, absl::Status failure = absl::OkStatus()) {
    HeldCall call;
    {
      absl::MutexLock lock(&mu_);
      call = std::move(held_[i]);
      held_.erase(held_.begin() + i);
    }
    for (size_t k = 0; k < codes.size(); ++k) {
      proto::PushResponse* r = call.reply->add_results();
      r->set_code(codes[k]);
      if (codes[k] != 0) r->set_message("refused");
      if (codes[k] == 0) r->set_version(10 * call.ids[k]);
    }
    call.done(std::move(failure));
  }
  Result ResultOf(uint64_t id) {
    absl::MutexLock lock(&mu_);
    return results_[id];
  }
  void AwaitHeld(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return held_.size() >= n; };
    mu_.Await(absl::Condition(&enough));
  }

  FakeTransport transport_;
  CallRunner runner_{&transport_, Clock::Real(), "push_batcher_test"};
  absl::Mutex mu_;
  std::vector<HeldCall> held_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, Result> results_ ABSL_GUARDED_BY(mu_);
  // Last: destroyed first (it waits for its batches).
  std::unique_ptr<PushBatcher> batcher_;
};

TEST_F(PushBatcherTest, FourBatchesInFlightPerServerAndWaitingPushesGoTogether) {
  for (uint64_t id = 1; id <= 4; ++id) Submit(0, id);
  // Each found a free slot: sent at once, alone.
  EXPECT_THAT(Held(), ElementsAre(ElementsAre(1), ElementsAre(2), ElementsAre(3), ElementsAre(4)));
  Submit(0, 5);
  Submit(0, 6);
  EXPECT_EQ(Held().size(), 4u) << "server 0's slots are taken: 5 and 6 wait";
  Submit(1, 7);
  ASSERT_EQ(Held().size(), 5u) << "server 1 has its own slots";
  EXPECT_THAT(Held()[4], ElementsAre(7));

  Answer(1, {0});  // the batch of push 2 returns: its slot goes to 5 and 6
  EXPECT_TRUE(ResultOf(2).status.ok());
  EXPECT_EQ(ResultOf(2).version, 20u);
  EXPECT_FALSE(ResultOf(5).ran);
  ASSERT_EQ(Held().size(), 5u);
  EXPECT_THAT(Held()[4], ElementsAre(5, 6));

  Answer(4, {0, 0});
  EXPECT_EQ(ResultOf(5).version, 50u);
  EXPECT_EQ(ResultOf(6).version, 60u);
  ASSERT_EQ(Held().size(), 4u);
  for (int i = 0; i < 4; ++i) Answer(0, {0});
  EXPECT_TRUE(Held().empty()) << "nothing was queued: the slots are freed";
  for (uint64_t id : {1, 3, 4, 7}) EXPECT_TRUE(ResultOf(id).status.ok()) << id;
}

TEST_F(PushBatcherTest, EachPushOfABatchGetsItsOwnResult) {
  for (uint64_t id = 1; id <= 4; ++id) Submit(0, id);
  for (uint64_t id = 5; id <= 7; ++id) Submit(0, id);
  Answer(0, {0});
  ASSERT_THAT(Held().back(), ElementsAre(5, 6, 7));
  // Two results for three pushes: the third gets INTERNAL.
  Answer(3, {0, static_cast<int>(absl::StatusCode::kFailedPrecondition)});
  EXPECT_TRUE(ResultOf(5).status.ok());
  EXPECT_EQ(ResultOf(5).version, 50u);
  EXPECT_EQ(ResultOf(6).status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ResultOf(6).status.message(), "server 0 (fake): Push: refused");
  EXPECT_EQ(ResultOf(6).version, 0u);
  EXPECT_EQ(ResultOf(7).status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(ResultOf(7).status.message(), HasSubstr("2 results for 3 pushes"));
}

TEST_F(PushBatcherTest, AFailedCallFailsEveryPushOfTheBatch) {
  for (uint64_t id = 1; id <= 4; ++id) Submit(0, id);
  Submit(0, 5);
  Submit(0, 6);
  Answer(0, {0});
  Answer(3, {}, absl::UnavailableError("connection reset"));
  for (uint64_t id : {5, 6}) {
    EXPECT_EQ(ResultOf(id).status.code(), absl::StatusCode::kUnavailable) << id;
    EXPECT_THAT(ResultOf(id).status.message(), HasSubstr("server 0 (fake): PushBatch failed"));
    EXPECT_EQ(ResultOf(id).version, 0u);
  }
}

TEST_F(PushBatcherTest, PushesADoneStartsQueueBehindItsBatchAndGoTogether) {
  Submit(0, 1, [this] {
    Submit(0, 10);
    Submit(0, 11);
  });
  for (uint64_t id = 2; id <= 4; ++id) Submit(0, id);
  Answer(0, {0});
  // The done ran while push 1's slot was still taken: 10 and 11 queued and
  // went out together on that slot.
  EXPECT_THAT(Held(),
              ElementsAre(ElementsAre(2), ElementsAre(3), ElementsAre(4), ElementsAre(10, 11)));
  Answer(3, {0, 0});
  EXPECT_TRUE(ResultOf(11).status.ok());
  EXPECT_EQ(ResultOf(11).version, 110u);
}

class PushBatcherRetryTest : public PushBatcherTest {
 protected:
  PushBatcherRetryTest() : PushBatcherTest(/*max_attempts=*/2) {}
};

TEST_F(PushBatcherRetryTest, ARetryResendsTheSameRequestIds) {
  for (uint64_t id = 1; id <= 4; ++id) Submit(0, id);
  Submit(0, 5);
  Submit(0, 6);
  Answer(0, {0});
  Answer(3, {}, absl::UnavailableError("connection reset"));
  // The retry comes from the runner's timer thread.
  AwaitHeld(4);
  EXPECT_THAT(Held()[3], ElementsAre(5, 6));
  EXPECT_FALSE(ResultOf(5).ran);
  Answer(3, {0, 0});
  EXPECT_TRUE(ResultOf(5).status.ok());
  EXPECT_TRUE(ResultOf(6).status.ok());
}

}  // namespace
}  // namespace ps
