#include "server/core/progress_board.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

absl::Status CheckValue(uint32_t worker, const char* field, double v) {
  if (std::isfinite(v) && v >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("progress of worker ", worker, ": ", field, " is ",
                                                 v, "; expected a finite value >= 0"));
}

}  // namespace

absl::Status ProgressBoard::Report(const proto::ReportProgressRequest& request, absl::Time now) {
  const proto::ProgressPoint& p = request.point();
  const uint32_t id = request.worker_id();
  for (const auto& [field, value] : {std::pair<const char*, double>{"seconds", p.seconds()},
                                     {"loss", p.loss()},
                                     {"examples_per_second", p.examples_per_second()},
                                     {"staleness", p.staleness()}}) {
    if (absl::Status s = CheckValue(id, field, value); !s.ok()) return s;
  }
  if (request.job().size() > 256) {
    return absl::InvalidArgumentError(absl::StrCat("progress of worker ", id, ": job name of ",
                                                   request.job().size(), " bytes; at most 256"));
  }
  absl::MutexLock lock(&mu_);
  ForgetLocked(now);
  if (!workers_.contains(id) && workers_.size() >= kMaxWorkers) {
    auto oldest = std::min_element(
        workers_.begin(), workers_.end(),
        [](const auto& a, const auto& b) { return a.second.last < b.second.last; });
    workers_.erase(oldest);
  }
  Worker& w = workers_[id];
  w.job = request.job();
  w.last = now;
  // A worker that starts again (its step went back) starts a new curve.
  if (!w.points.empty() && p.step() < w.points.back().step()) w.points.clear();
  w.points.push_back(p);
  if (w.points.size() > kMaxPoints) w.points.pop_front();
  return absl::OkStatus();
}

void ProgressBoard::Snapshot(absl::Time now,
                             google::protobuf::RepeatedPtrField<proto::WorkerProgress>* out) {
  absl::MutexLock lock(&mu_);
  ForgetLocked(now);
  std::vector<uint32_t> ids;
  for (const auto& [id, w] : workers_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (uint32_t id : ids) {
    const Worker& w = workers_.at(id);
    proto::WorkerProgress* p = out->Add();
    p->set_worker_id(id);
    p->set_job(w.job);
    p->set_age_seconds(absl::ToDoubleSeconds(now - w.last));
    for (const proto::ProgressPoint& point : w.points) *p->add_points() = point;
  }
}

void ProgressBoard::ForgetLocked(absl::Time now) {
  absl::erase_if(workers_, [now](const auto& entry) { return now - entry.second.last > kForget; });
}

}  // namespace ps
