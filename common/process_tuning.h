// Process-wide settings for the data path, applied once at the start of
// main() by ps_server, ps_worker and the benchmarks (never by libraries).
//
//  - malloc keeps large freed blocks instead of returning them to the kernel,
//    so multi-megabyte request buffers do not page-fault on every call;
//  - Abseil's mutex deadlock detection (on in Debian's build) is turned off:
//    it records a lock graph on every acquisition of the hot-path locks.
#ifndef PS_COMMON_PROCESS_TUNING_H_
#define PS_COMMON_PROCESS_TUNING_H_

namespace ps {

void TuneProcessForDataPath();

}  // namespace ps

#endif  // PS_COMMON_PROCESS_TUNING_H_
