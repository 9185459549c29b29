#include "server/ui/ui_http.h"

#include <utility>

#include "server/ui/ui_page.h"

namespace ps {

HttpOptions UiHttpOptions(ClusterReader* reader,
                          std::function<absl::Status(const std::string& authorization)> check,
                          const TlsFiles& tls) {
  HttpOptions options;
  options.routes.push_back({"/", "text/html; charset=utf-8", []() -> absl::StatusOr<std::string> {
                              return std::string(UiPageHtml());
                            }});
  options.routes.push_back(
      {"/api/cluster", "application/json",
       [reader]() -> absl::StatusOr<std::string> { return reader->ReadJson(); }});
  options.check = std::move(check);
  if (!tls.cert.empty() && !tls.key.empty()) {
    options.tls_cert_file = tls.cert;
    options.tls_key_file = tls.key;
  }
  return options;
}

}  // namespace ps
