#include "worker/run_common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/train/progress_reporter.h"

namespace ps {

void PrintLine(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

absl::Status Prefixed(const std::string& prefix, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

PsClientOptions ClientOptions(const WorkerConfig& config, const WorkerEnv& env,
                              PsClientOptions base, int worker_id) {
  base.servers = config.servers;
  base.worker_id = static_cast<uint32_t>(worker_id);
  if (env.directory != nullptr) {
    base.directory = env.directory;
    SpanFailoverWithRetries(&base);
  }
  return base;
}

ProgressSink ReportingSink(TrainingObserver* observer, PsClient* client, const std::string& job) {
  ProgressSink sink = observer != nullptr ? observer->Sink() : ProgressSink();
  auto reporter = std::make_shared<ProgressReporter>([client, job](const ProgressPoint& p) {
    proto::ProgressPoint point;
    point.set_seconds(p.seconds);
    point.set_epoch(static_cast<uint32_t>(std::max(0, p.epoch)));
    point.set_step(static_cast<uint64_t>(std::max<int64_t>(0, p.step)));
    point.set_examples(static_cast<uint64_t>(std::max<int64_t>(0, p.examples)));
    point.set_loss(std::isfinite(p.loss) ? std::max(0.0, p.loss) : 0.0);
    point.set_examples_per_second(p.examples_per_second);
    point.set_staleness(p.mean_staleness);
    return client->ReportProgress(job, point);
  });
  return [sink, reporter](const ProgressPoint& p) {
    if (sink) sink(p);
    reporter->Add(p);
  };
}

absl::StatusOr<std::unique_ptr<PsClient>> ConnectAndCreate(
    const PsClientOptions& options, const std::vector<proto::TableDef>& tables) {
  absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Connect(options);
  if (!client.ok()) return client.status();
  if (absl::Status s = CreateModelTables(**client, tables); !s.ok()) return s;
  return client;
}

absl::StatusOr<uint64_t> ResumeClock(PsClient& client, const std::vector<proto::TableDef>& tables,
                                     const std::string& who) {
  absl::StatusOr<PsClient::WorkerPosition> position = client.Position();
  if (!position.ok()) return position.status();
  if (position->restored_from.empty()) {
    std::printf("%s: --resume: the servers restored no checkpoint; starting from the beginning\n",
                who.c_str());
    return 0;
  }
  uint64_t clock = UINT64_MAX;
  for (const auto& def : tables) {
    auto it = position->clocks.find(def.name());
    clock = std::min(clock, it == position->clocks.end() ? 0 : it->second);
  }
  if (tables.empty()) clock = 0;
  std::printf("%s: --resume: servers restored %s (cut %llu); this worker continues at clock %llu\n",
              who.c_str(), position->restored_from.c_str(),
              static_cast<unsigned long long>(position->restored_cut),
              static_cast<unsigned long long>(clock));
  std::fflush(stdout);
  return clock;
}

}  // namespace ps
