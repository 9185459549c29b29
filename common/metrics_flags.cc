#include "common/metrics_flags.h"

#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/port_file.h"

ABSL_FLAG(int, metrics_port, -1,
          "serve Prometheus metrics (/metrics), /healthz and /readyz over HTTP on this port "
          "(0: a free port; -1: off); ps_server listens on the host of --listen, ps_worker on "
          "--metrics_host");
ABSL_FLAG(std::string, metrics_port_file, "", "if set, write the metrics port to this file");

namespace ps {

absl::StatusOr<int> MetricsPortFromFlags() {
  const int port = absl::GetFlag(FLAGS_metrics_port);
  if (port < -1 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_port=", port, " must be in 0..65535, or -1 (off)"));
  }
  return port;
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> StartMetricsFromFlags(
    int port, const std::string& host, const MetricsRegistry* metrics,
    std::function<absl::Status()> ready, HttpOptions http) {
  if (port < 0) return nullptr;
  auto started = MetricsHttpServer::Start(host, port, metrics, std::move(ready), std::move(http));
  if (!started.ok()) return started.status();
  if (const std::string f = absl::GetFlag(FLAGS_metrics_port_file); !f.empty()) {
    if (absl::Status s = WritePortFile(f, (*started)->port(), "--metrics_port_file"); !s.ok()) {
      return s;
    }
  }
  return started;
}

}  // namespace ps
