// The HTTP endpoint of a process's metrics and health (cpp-httplib):
//   GET /metrics  the registry in Prometheus' text format
//   GET /healthz  200 "ok" while the process serves (liveness)
//   GET /readyz   200 "ready", or 503 with the reason, from `ready`
//                 (readiness: a server holds its place and is not fenced)
// Anything else is 404. Served on its own threads until destroyed.
#ifndef PS_COMMON_METRICS_HTTP_H_
#define PS_COMMON_METRICS_HTTP_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/metrics.h"

namespace httplib {
class Server;
}

namespace ps {

class MetricsHttpServer {
 public:
  // Listens on host:port (port 0: a free one). `registry` and `ready` must
  // outlive the server. Errors: UNAVAILABLE naming the address when it
  // cannot listen there.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& host, int port, const MetricsRegistry* registry,
      std::function<absl::Status()> ready);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }

 private:
  MetricsHttpServer() = default;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace ps

#endif  // PS_COMMON_METRICS_HTTP_H_
