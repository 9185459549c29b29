// The metrics endpoint's flags, shared by ps_server and ps_worker:
// --metrics_port (0: a free port; -1: off) and --metrics_port_file. Defined
// once here, for main() files only; each binary says which host the
// endpoint listens on (ps_server: its --listen host; ps_worker:
// --metrics_host).
//
// Thread-safe after absl::ParseCommandLine (it only reads flags).
#ifndef PS_COMMON_METRICS_FLAGS_H_
#define PS_COMMON_METRICS_FLAGS_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/metrics.h"
#include "common/metrics_http.h"

namespace ps {

// --metrics_port, checked: INVALID_ARGUMENT naming the flag and its value
// when it is not in 0..65535 or -1.
absl::StatusOr<int> MetricsPortFromFlags();

// /metrics, /healthz and /readyz on `host` at `port` (from
// MetricsPortFromFlags; -1: off, null returned), `ready` answering /readyz
// (null: always ready); writes the port to --metrics_port_file when set.
// Errors: those of starting the endpoint or writing the file, naming them.
absl::StatusOr<std::unique_ptr<MetricsHttpServer>> StartMetricsFromFlags(
    int port, const std::string& host, const MetricsRegistry* metrics,
    std::function<absl::Status()> ready, HttpOptions http = {});

}  // namespace ps

#endif  // PS_COMMON_METRICS_FLAGS_H_
