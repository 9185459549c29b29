// ProgressBoard: points kept per worker in order and bounded, a restarted
// worker's curve started again, stale workers forgotten, the oldest worker
// making room past the cap, and bad values refused naming worker and field.
#include "server/core/progress_board.h"

#include <cmath>
#include <string>

#include "gtest/gtest.h"

namespace ps {
namespace {

proto::ReportProgressRequest Point(uint32_t worker, uint64_t step, double loss) {
  proto::ReportProgressRequest r;
  r.set_worker_id(worker);
  r.set_job("mlp");
  r.mutable_point()->set_step(step);
  r.mutable_point()->set_loss(loss);
  r.mutable_point()->set_examples_per_second(100);
  return r;
}

TEST(ProgressBoardTest, KeepsTheNewestPointsOfEachWorker) {
  ProgressBoard board;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  for (uint64_t s = 1; s <= ProgressBoard::kMaxPoints + 5; ++s) {
    ASSERT_TRUE(board.Report(Point(7, s, 1.0 / s), t0).ok());
  }
  ASSERT_TRUE(board.Report(Point(3, 1, 2.0), t0 + absl::Seconds(2)).ok());
  google::protobuf::RepeatedPtrField<proto::WorkerProgress> out;
  board.Snapshot(t0 + absl::Seconds(5), &out);
  ASSERT_EQ(out.size(), 2);
  EXPECT_EQ(out[0].worker_id(), 3u);  // by worker id
  EXPECT_DOUBLE_EQ(out[0].age_seconds(), 3);
  const proto::WorkerProgress& w = out[1];
  EXPECT_EQ(w.job(), "mlp");
  ASSERT_EQ(static_cast<size_t>(w.points_size()), ProgressBoard::kMaxPoints);
  EXPECT_EQ(w.points(0).step(), 6u);  // the first five made room
  EXPECT_EQ(w.points(w.points_size() - 1).step(), ProgressBoard::kMaxPoints + 5);
}

TEST(ProgressBoardTest, ARestartedWorkerStartsANewCurve) {
  ProgressBoard board;
  const absl::Time t = absl::FromUnixSeconds(1000);
  ASSERT_TRUE(board.Report(Point(1, 10, 1), t).ok());
  ASSERT_TRUE(board.Report(Point(1, 20, 1), t).ok());
  ASSERT_TRUE(board.Report(Point(1, 2, 1), t).ok());
  google::protobuf::RepeatedPtrField<proto::WorkerProgress> out;
  board.Snapshot(t, &out);
  ASSERT_EQ(out.size(), 1);
  ASSERT_EQ(out[0].points_size(), 1);
  EXPECT_EQ(out[0].points(0).step(), 2u);
}

TEST(ProgressBoardTest, ForgetsSilentWorkersAndMakesRoomPastTheCap) {
  ProgressBoard board;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  ASSERT_TRUE(board.Report(Point(1, 1, 1), t0).ok());
  google::protobuf::RepeatedPtrField<proto::WorkerProgress> out;
  board.Snapshot(t0 + ProgressBoard::kForget + absl::Seconds(1), &out);
  EXPECT_EQ(out.size(), 0);
  for (uint32_t w = 0; w <= ProgressBoard::kMaxWorkers; ++w) {
    ASSERT_TRUE(board.Report(Point(w, 1, 1), t0 + absl::Seconds(w)).ok());
  }
  out.Clear();
  board.Snapshot(t0 + absl::Seconds(ProgressBoard::kMaxWorkers), &out);
  ASSERT_EQ(static_cast<size_t>(out.size()), ProgressBoard::kMaxWorkers);
  EXPECT_EQ(out[0].worker_id(), 1u);  // worker 0, heard from first, made room
}

TEST(ProgressBoardTest, RefusesValuesThatAreNotFiniteOrNegative) {
  ProgressBoard board;
  const absl::Time t = absl::FromUnixSeconds(1000);
  absl::Status s = board.Report(Point(4, 1, std::nan("")), t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "progress of worker 4: loss is nan; expected a finite value >= 0");
  proto::ReportProgressRequest negative = Point(4, 1, 1);
  negative.mutable_point()->set_examples_per_second(-1);
  EXPECT_EQ(board.Report(negative, t).code(), absl::StatusCode::kInvalidArgument);
  proto::ReportProgressRequest long_job = Point(4, 1, 1);
  long_job.set_job(std::string(300, 'x'));
  EXPECT_EQ(board.Report(long_job, t).code(), absl::StatusCode::kInvalidArgument);
  google::protobuf::RepeatedPtrField<proto::WorkerProgress> out;
  board.Snapshot(t, &out);
  EXPECT_EQ(out.size(), 0);  // nothing kept
}

}  // namespace
}  // namespace ps
