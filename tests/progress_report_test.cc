// Workers' progress through real servers (in-process, gRPC): a point sent
// with PsClient::ReportProgress reaches every server, whose Stats list the
// worker with its points; a bad point is refused naming the worker.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/in_process_cluster.h"

namespace ps {
namespace {

TEST(ProgressReportTest, EveryServerKeepsTheWorkersPoints) {
  auto cluster = InProcessCluster::Start(2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto worker = (*cluster)->Connect(5);
  for (int step = 1; step <= 3; ++step) {
    proto::ProgressPoint p;
    p.set_step(step);
    p.set_epoch(1);
    p.set_loss(1.0 / step);
    p.set_examples_per_second(1000);
    ASSERT_TRUE(worker->ReportProgress("mlp", p).ok());
  }
  auto stats = (*cluster)->Connect(6)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->size(), 2u);
  for (const ServerStats& s : *stats) {
    ASSERT_EQ(s.stats.workers_size(), 1) << "server " << s.server;
    const proto::WorkerProgress& w = s.stats.workers(0);
    EXPECT_EQ(w.worker_id(), 5u);
    EXPECT_EQ(w.job(), "mlp");
    ASSERT_EQ(w.points_size(), 3);
    EXPECT_EQ(w.points(2).step(), 3u);
    EXPECT_DOUBLE_EQ(w.points(2).loss(), 1.0 / 3);
  }
  proto::ProgressPoint bad;
  bad.set_loss(-1);
  absl::Status s = worker->ReportProgress("mlp", bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("progress of worker 5: loss is -1"));
}

}  // namespace
}  // namespace ps
