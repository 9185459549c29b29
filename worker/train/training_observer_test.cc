#include "worker/train/training_observer.h"

#include <fstream>
#include <sstream>
#include <string>

#include "common/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/temp_dir.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(TrainingObserverTest, WritesTheCurveAndServesTheLatestPoint) {
  const std::string path = MakeTestDir("observer") + "/curve.csv";
  MetricsRegistry metrics;
  auto observer = TrainingObserver::Create(path, &metrics);
  ASSERT_TRUE(observer.ok()) << observer.status();
  EXPECT_THAT(metrics.Render(), Not(HasSubstr("ps_worker_loss"))) << "no point yet";
  ProgressPoint p;
  p.seconds = 1.5;
  p.epoch = 1;
  p.step = 100;
  p.examples = 6400;
  p.loss = 0.75;
  p.examples_per_second = 4266.7;
  p.mean_staleness = 1.25;
  (*observer)->Sink()(p);
  p.seconds = 3;
  p.step = 200;
  p.examples = 12800;
  p.loss = 0.5;
  (*observer)->Record(p);
  (*observer)->Finish("accuracy", 0.8712);
  EXPECT_EQ(ReadFile(path),
            "seconds,epoch,step,examples,loss,examples_per_second,staleness,test_metric,"
            "test_value\n"
            "1.500,1,100,6400,0.750000,4266.7,1.250,,\n"
            "3.000,1,200,12800,0.500000,4266.7,1.250,,\n"
            "3.000,1,200,12800,0.500000,4266.7,1.250,accuracy,0.8712\n");
  const std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("ps_worker_steps_total 200\n"));
  EXPECT_THAT(text, HasSubstr("ps_worker_loss 0.5\n"));
  EXPECT_THAT(text, HasSubstr("ps_worker_test_result{metric=\"accuracy\"} 0.8712\n"));
}

TEST(TrainingObserverTest, AnUnwritableCsvIsNamed) {
  auto observer = TrainingObserver::Create("/nonexistent-dir/curve.csv", nullptr);
  ASSERT_FALSE(observer.ok());
  EXPECT_THAT(observer.status().message(), HasSubstr("--curve_csv=/nonexistent-dir/curve.csv"));
}

}  // namespace
}  // namespace ps
