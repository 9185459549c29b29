// The HTTP endpoint of a process's metrics and health (cpp-httplib):
//   GET /metrics  the registry in Prometheus' text format
//   GET /healthz  200 "ok" while the process serves (liveness)
//   GET /readyz   200 "ready", or 503 with the reason, from `ready`
//                 (readiness: a server holds its place and is not fenced)
// and the pages of HttpOptions::routes (the web UI). Anything else is 404.
// Served on its own threads until destroyed; over HTTPS when given a
// certificate and key.
#ifndef PS_COMMON_METRICS_HTTP_H_
#define PS_COMMON_METRICS_HTTP_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/metrics.h"

namespace httplib {
class Server;
}

namespace ps {

// A document served besides the metrics: GET `path` answers with what
// `body` returns as `content_type` (an error: 503 with its message).
struct HttpRoute {
  std::string path;
  std::string content_type;
  std::function<absl::StatusOr<std::string>()> body;
};

struct HttpOptions {
  std::vector<HttpRoute> routes;
  // Set: a route's request must pass it, given the request's authorization
  // ("Bearer T" from the Authorization header, or from a `token=T` query
  // parameter, as a browser opening a link sends it); refused with 401 and
  // the error's message otherwise. /metrics, /healthz and /readyz stay
  // open (Prometheus and the probes).
  std::function<absl::Status(const std::string& authorization)> check;
  // Both set: HTTPS with this PEM certificate chain and key.
  std::string tls_cert_file, tls_key_file;
};

class MetricsHttpServer {
 public:
  // Listens on host:port (port 0: a free one). `registry` (null: /metrics
  // is empty), `ready` and the options' functions must outlive the server.
  // Errors: UNAVAILABLE naming the address when it cannot listen there;
  // INVALID_ARGUMENT naming the files when the certificate or key cannot be
  // loaded.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& host, int port, const MetricsRegistry* registry,
      std::function<absl::Status()> ready, HttpOptions options = {});
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
