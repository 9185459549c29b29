// The web UI's routes on an HTTP endpoint (common/metrics_http.h): GET /
// the page (server/ui/index.html), GET /api/cluster the cluster as
// `reader` reads it (server/ui/cluster_view.h). Both pass `check` first
// when set (tokens on: the page is opened as /?token=T and sends the token
// with its reads); HTTPS when `tls` has a certificate and a key.
#ifndef PS_SERVER_UI_UI_HTTP_H_
#define PS_SERVER_UI_UI_HTTP_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "common/metrics_http.h"
#include "common/peer_security.h"
#include "server/ui/cluster_reader.h"

namespace ps {

// `reader` must outlive the endpoint.
HttpOptions UiHttpOptions(ClusterReader* reader,
                          std::function<absl::Status(const std::string& authorization)> check,
                          const TlsFiles& tls);

}  // namespace ps

#endif  // PS_SERVER_UI_UI_HTTP_H_
