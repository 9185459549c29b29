#include "common/process_cpu.h"

#include <cmath>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(ProcessCpuSeconds, GrowsWithWorkDone) {
  const double before = ProcessCpuSeconds();
  // Busy for at least 50 ms of CPU, measured on the process's own clock.
  volatile double sink = 0;
  for (int round = 0; round < 1000 && ProcessCpuSeconds() - before < 0.05; ++round) {
    for (int i = 0; i < 200000; ++i) sink = sink + std::sqrt(static_cast<double>(i));
  }
  const double after = ProcessCpuSeconds();
  EXPECT_GE(after - before, 0.05);
  EXPECT_LT(after - before, 60.0);
}

TEST(ProcessCpuSeconds, DoesNotCountSleep) {
  const double before = ProcessCpuSeconds();
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_LT(ProcessCpuSeconds() - before, 0.1);
}

}  // namespace
}  // namespace ps
