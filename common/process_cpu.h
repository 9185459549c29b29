// The CPU time (user + system, every thread) this process has used since it
// started, in seconds: what the Stats RPC reports as a server's
// process_cpu_seconds, and what ps_bench reads to give the CPU each side
// spends per operation. And its peak memory.
#ifndef PS_COMMON_PROCESS_CPU_H_
#define PS_COMMON_PROCESS_CPU_H_

namespace ps {

double ProcessCpuSeconds();

// The largest resident set this process has had, in MiB (getrusage's
// ru_maxrss): what a worker reports as its memory.
double ProcessPeakRssMib();

}  // namespace ps

#endif  // PS_COMMON_PROCESS_CPU_H_
