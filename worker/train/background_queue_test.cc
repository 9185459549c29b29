#include "worker/train/background_queue.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(BackgroundQueueTest, RunsTasksInOrder) {
  std::vector<int> order;
  {
    BackgroundQueue queue;
    for (int i = 0; i < 100; ++i) {
      queue.Submit([&order, i] {
        order.push_back(i);
        return absl::OkStatus();
      });
    }
    EXPECT_TRUE(queue.WaitUntilPending(0).ok());
    EXPECT_EQ(order.size(), 100u);
  }
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(BackgroundQueueTest, WaitUntilPendingLeavesLaterTasksRunning) {
  BackgroundQueue queue;
  absl::Notification release;
  std::atomic<int> ran{0};
  queue.Submit([&] {
    ++ran;
    return absl::OkStatus();
  });
  queue.Submit([&] {
    release.WaitForNotification();
    ++ran;
    return absl::OkStatus();
  });
  // The first task can finish while the second is blocked.
  EXPECT_TRUE(queue.WaitUntilPending(1).ok());
  EXPECT_EQ(ran.load(), 1);
  release.Notify();
  EXPECT_TRUE(queue.WaitUntilPending(0).ok());
  EXPECT_EQ(ran.load(), 2);
}

TEST(BackgroundQueueTest, KeepsTheFirstError) {
  BackgroundQueue queue;
  queue.Submit([] { return absl::UnavailableError("first"); });
  queue.Submit([] { return absl::InternalError("second"); });
  absl::Status s = queue.WaitUntilPending(0);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "first");
}

}  // namespace
}  // namespace ps
