#include "worker/train/progress_reporter.h"

#include <cstdio>
#include <string>
#include <utility>

namespace ps {

void ProgressReporter::Add(const ProgressPoint& point) {
  {
    absl::MutexLock lock(&mu_);
    const bool queued = waiting_.has_value();
    waiting_ = point;
    if (queued) {
      ++replaced_;
      return;
    }
  }
  queue_.Submit([this] {
    SendLatest();
    return absl::OkStatus();
  });
}

void ProgressReporter::SendLatest() {
  ProgressPoint point;
  {
    absl::MutexLock lock(&mu_);
    point = *std::move(waiting_);
    waiting_.reset();
  }
  const absl::Status s = send_(point);
  if (!s.ok() && !warned_) {
    warned_ = true;
    std::fprintf(stderr, "progress not reported to the servers (said once): %s\n",
                 std::string(s.message()).c_str());
  }
  absl::MutexLock lock(&mu_);
  ++sent_;
}

int64_t ProgressReporter::sent() const {
  absl::MutexLock lock(&mu_);
  return sent_;
}

int64_t ProgressReporter::replaced() const {
  absl::MutexLock lock(&mu_);
  return replaced_;
}

}  // namespace ps
