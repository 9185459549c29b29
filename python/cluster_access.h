// How the Python module reaches a cluster and reports its failures: the
// paramserver.Error it raises, the TLS files and token of a call, a static
// cluster's spec, the connection a Client holds (a call runs on it with the
// GIL released), and checkpoint() of a cluster. Call with the GIL held
// unless said otherwise.
#ifndef PS_PYTHON_CLUSTER_ACCESS_H_
#define PS_PYTHON_CLUSTER_ACCESS_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/etcd_kv_store.h"
#include "common/peer_security.h"
#include "pybind11/pybind11.h"
#include "worker/client/ps_client.h"
#include "worker/client/shard_directory.h"

namespace ps::python {

// Raises paramserver.Error(code name, message).
[[noreturn]] void Raise(const absl::Status& status);

inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> result) {
  if (!result.ok()) Raise(result.status());
  return *std::move(result);
}

// The TLS files and token of Client() and checkpoint() (common/peer_security.h);
// null when none is given: the process's default, plaintext. ValueError
// naming `call` for a bad one.
std::shared_ptr<const PeerSecurity> SecurityOf(const std::string& call, const std::string& token,
                                               const std::string& ca_cert, const std::string& cert,
                                               const std::string& key);

// The servers of a static cluster's spec; ValueError naming `call`.
std::vector<std::string> ServersOf(const std::string& call, const std::string& servers);

struct Connection {
  // Destroyed in reverse order: the client before the directory it routes
  // by, the directory before the etcd store it watches.
  std::unique_ptr<EtcdKvStore> etcd;
  std::shared_ptr<const ShardDirectory> directory;
  std::unique_ptr<PsClient> client;
};

// Runs call(client) with the GIL released. `connection` is let go of before
// the GIL is taken back: when close() ran meanwhile, this call was its last
// holder and destroys it here, without the GIL.
template <typename Call>
auto WithoutGil(std::shared_ptr<Connection> connection, Call&& call) {
  pybind11::gil_scoped_release release;
  struct LetGo {
    std::shared_ptr<Connection>& connection;
    ~LetGo() { connection.reset(); }  // before `release` takes the GIL back
  } let_go{connection};
  return call(*connection->client);
}

// checkpoint(): asks the coordinator (server 0 of a static cluster, the
// primary of shard 0 of a replicated one) for a checkpoint; its path,
// sequence, base_sequence, cut, bytes and seconds.
pybind11::dict Checkpoint(const std::string& servers, const std::string& etcd,
                          const std::string& cluster, bool full, double timeout,
                          const std::string& token, const std::string& ca_cert,
                          const std::string& cert, const std::string& key);

}  // namespace ps::python

#endif  // PS_PYTHON_CLUSTER_ACCESS_H_
