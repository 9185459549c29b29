// Test helper: several parameter-server shards in one process, each a real
// gRPC server on its own kernel-chosen port of 127.0.0.1, plus client options
// that point at them. Not thread-safe; the servers themselves are.
#ifndef PS_TESTS_IN_PROCESS_CLUSTER_H_
#define PS_TESTS_IN_PROCESS_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/placement.h"
#include "server/ps_server.h"
#include "worker/client/ps_client.h"

namespace ps {

class InProcessCluster {
 public:
  // Starts num_servers shards on 127.0.0.1:0, each with `checkpoint`
  // (e.g. a directory to restore from).
  static absl::StatusOr<std::unique_ptr<InProcessCluster>> Start(
      int num_servers, PlacementConfig placement = {}, ServerLimits limits = {},
      ServerCheckpointOptions checkpoint = {});

  const std::vector<std::string>& addresses() const { return addresses_; }
  PsServer& server(int i) { return *servers_[i]; }
  int num_servers() const { return static_cast<int>(servers_.size()); }

  // Options for a client of this cluster (short deadlines for tests).
  PsClientOptions ClientOptions(uint32_t worker_id) const;
  // The same with bounded delay `tau` (0: BSP) and a 5 s lease.
  PsClientOptions BoundedClientOptions(uint32_t worker_id, uint32_t tau) const;
  // Connects a client (with ClientOptions(worker_id), or `options`); fails
  // the calling test on error and returns null.
  std::unique_ptr<PsClient> Connect(uint32_t worker_id) const;
  std::unique_ptr<PsClient> Connect(const PsClientOptions& options) const;

 private:
  PlacementConfig placement_;
  std::vector<std::unique_ptr<PsServer>> servers_;
  std::vector<std::string> addresses_;
};

}  // namespace ps

#endif  // PS_TESTS_IN_PROCESS_CLUSTER_H_
