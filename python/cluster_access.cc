#include "python/cluster_access.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/checkpoint_request.h"
#include "common/cluster_spec.h"

namespace py = pybind11;

namespace ps::python {
namespace {

// The coordinator: server 0 of a static cluster, or the primary of shard 0
// of a replicated one (its ring read from etcd).
absl::StatusOr<std::string> CoordinatorOf(const std::string& servers, const std::string& etcd,
                                          const std::string& cluster, double timeout) {
  if (etcd.empty()) return ServersOf("checkpoint", servers)[0];
  EtcdKvStore kv(EtcdOptions{etcd});
  absl::StatusOr<std::unique_ptr<EtcdShardDirectory>> directory =
      EtcdShardDirectory::Start(&kv, cluster, absl::Seconds(timeout));
  if (!directory.ok()) {
    return absl::Status(directory.status().code(),
                        absl::StrCat("etcd=", etcd, ": ", directory.status().message()));
  }
  std::string address = (*directory)->PrimaryAddress(0);
  if (address.empty()) {
    return absl::UnavailableError(
        absl::StrCat((*directory)->Describe(0), " has no primary: no checkpoint can be taken now"));
  }
  return address;
}

}  // namespace

[[noreturn]] void Raise(const absl::Status& status) {
  py::object error_type = py::module_::import("paramserver._errors").attr("Error");
  py::object error =
      error_type(absl::StatusCodeToString(status.code()), std::string(status.message()));
  PyErr_SetObject(error_type.ptr(), error.ptr());
  throw py::error_already_set();
}

std::shared_ptr<const PeerSecurity> SecurityOf(const std::string& call, const std::string& token,
                                               const std::string& ca_cert, const std::string& cert,
                                               const std::string& key) {
  const TlsFiles files{ca_cert, cert, key};
  if (token.empty() && !files.enabled()) return nullptr;
  if (token.find_first_of(" \t\r\n") != std::string::npos) {
    throw py::value_error(absl::StrCat(call, ": token must be one word (no whitespace)"));
  }
  absl::StatusOr<PeerSecurity> security = PeerSecurityFromFiles(files, /*token_file=*/"");
  if (!security.ok()) {
    // Its messages name ps_worker's flags.
    throw py::value_error(absl::StrCat(call, ": ", security.status().message(),
                                       " (ca_cert, cert and key are ps_worker's --tls_ca, "
                                       "--tls_cert and --tls_key)"));
  }
  security->token = token;
  return std::make_shared<const PeerSecurity>(*std::move(security));
}

std::vector<std::string> ServersOf(const std::string& call, const std::string& servers) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(servers);
  if (!spec.ok()) throw py::value_error(absl::StrCat(call, ": servers: ", spec.status().message()));
  return spec->servers;
}

py::dict Checkpoint(const std::string& servers, const std::string& etcd, const std::string& cluster,
                    bool full, double timeout, const std::string& token, const std::string& ca_cert,
                    const std::string& cert, const std::string& key) {
  if (etcd.empty()) (void)ServersOf("checkpoint", servers);  // throws on a bad spec
  const std::shared_ptr<const PeerSecurity> security =
      SecurityOf("checkpoint", token, ca_cert, cert, key);
  absl::StatusOr<proto::CheckpointResponse> reply;
  {
    py::gil_scoped_release release;
    absl::StatusOr<std::string> coordinator = CoordinatorOf(servers, etcd, cluster, timeout);
    reply = coordinator.ok()
                ? RequestCheckpoint(*coordinator, full, absl::Seconds(timeout), security.get())
                : absl::StatusOr<proto::CheckpointResponse>(coordinator.status());
  }
  ThrowIfError(reply.status());
  py::dict result;
  result["path"] = reply->path();
  result["sequence"] = reply->sequence();
  result["base_sequence"] = reply->base_sequence();
  result["cut"] = reply->cut();
  result["bytes"] = reply->bytes();
  result["seconds"] = reply->micros() / 1e6;
  return result;
}

}  // namespace ps::python
