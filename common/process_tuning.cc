#include "common/process_tuning.h"

#include <malloc.h>

#include "absl/synchronization/mutex.h"

namespace ps {

void TuneProcessForDataPath() {
  // Blocks up to 512 MiB come from the heap, and up to 1 GiB of free heap is
  // kept, so buffers are reused rather than mapped and faulted in each time.
  mallopt(M_MMAP_THRESHOLD, 512 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace ps
