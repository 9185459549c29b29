#include "common/process_cpu.h"

#include <cmath>
#include <vector>

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

TEST(ProcessPeakRssMib, GrowsWithMemoryTouched) {
  const double before = ProcessPeakRssMib();
  EXPECT_GT(before, 0);
  std::vector<char> block(size_t{96} << 20);
  for (size_t i = 0; i < block.size(); i += 4096) block[i] = static_cast<char>(i);
  EXPECT_GE(ProcessPeakRssMib(), before + 64);  // pages touched count, wherever they came from
  EXPECT_EQ(block[4096], static_cast<char>(4096));
}

}  // namespace
}  // namespace ps
