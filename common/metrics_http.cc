#include "common/metrics_http.h"

#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ps {

namespace {

// The request's authorization: its header, else its `token` parameter.
std::string AuthorizationOf(const httplib::Request& req) {
  if (req.has_header("Authorization")) return req.get_header_value("Authorization");
  if (req.has_param("token")) return absl::StrCat("Bearer ", req.get_param_value("token"));
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, const MetricsRegistry* registry,
    std::function<absl::Status()> ready, HttpOptions options) {
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  if (!options.tls_cert_file.empty() && !options.tls_key_file.empty()) {
    auto https = std::make_unique<httplib::SSLServer>(options.tls_cert_file.c_str(),
                                                      options.tls_key_file.c_str());
    if (!https->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metrics: HTTPS with certificate ", options.tls_cert_file, " and key ",
          options.tls_key_file, ": could not load them (PEM files, the key matching)"));
    }
    server->http_ = std::move(https);
  } else {
    server->http_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& http = *server->http_;
  // httplib's default is SO_REUSEPORT, with which a second process on the
  // same port silently shares it: a taken port must be an error.
  http.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http.Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry != nullptr ? registry->Render() : std::string(),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  for (HttpRoute& route : options.routes) {
    const std::string path = route.path;  // the lambda takes the route
    http.Get(path, [route = std::move(route), check = options.check](const httplib::Request& req,
                                                                     httplib::Response& res) {
      if (check) {
        if (absl::Status s = check(AuthorizationOf(req)); !s.ok()) {
          res.status = 401;
          res.set_content(absl::StrCat(s.message(), "\n"), "text/plain");
          return;
        }
      }
      absl::StatusOr<std::string> body = route.body();
      if (!body.ok()) {
        res.status = 503;
        res.set_content(absl::StrCat(body.status().message(), "\n"), "text/plain");
        return;
      }
      res.set_header("Cache-Control", "no-store");
      res.set_content(*std::move(body), route.content_type);
    });
  }
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  http.Get("/readyz", [ready = std::move(ready)](const httplib::Request&, httplib::Response& res) {
    const absl::Status status = ready ? ready() : absl::OkStatus();
    if (status.ok()) {
      res.set_content("ready\n", "text/plain");
    } else {
      res.status = 503;
      res.set_content(absl::StrCat("not ready: ", status.message(), "\n"), "text/plain");
    }
  });
  if (port == 0) {
    server->port_ = http.bind_to_any_port(host);
    if (server->port_ <= 0) server->port_ = 0;
  } else if (http.bind_to_port(host, port)) {
    server->port_ = port;
  }
  if (server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("metrics: could not listen on ", host, ":", port,
                                               "; is the port in use? see --metrics_port"));
  }
  server->thread_ = std::thread([s = server.get()] { s->http_->listen_after_bind(); });
  // stop() only ends a server that is already listening: wait for it
  // (bounded; the socket is bound, so this takes a thread start).
  for (int i = 0; i < 5000 && !http.is_running(); ++i) absl::SleepFor(absl::Milliseconds(1));
  if (!http.is_running()) {
    return absl::InternalError(
        absl::StrCat("metrics: the server on ", host, ":", server->port_, " did not start"));
  }
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (http_ != nullptr) http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace ps
