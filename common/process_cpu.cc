#include "common/process_cpu.h"

#include <sys/resource.h>

namespace ps {
namespace {

double Seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; }

}  // namespace

double ProcessCpuSeconds() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;  // cannot fail for RUSAGE_SELF
  return Seconds(usage.ru_utime) + Seconds(usage.ru_stime);
}

double ProcessPeakRssMib() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

}  // namespace ps
