#include "tests/in_process_cluster.h"

#include "gtest/gtest.h"

namespace ps {

absl::StatusOr<std::unique_ptr<InProcessCluster>> InProcessCluster::Start(
    int num_servers, PlacementConfig placement, ServerLimits limits,
    ServerCheckpointOptions checkpoint) {
  auto cluster = std::make_unique<InProcessCluster>();
  cluster->placement_ = placement;
  for (int i = 0; i < num_servers; ++i) {
    ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.server_index = i;
    options.num_servers = num_servers;
    options.placement = placement;
    options.limits = limits;
    options.checkpoint = checkpoint;
    auto server = PsServer::Start(options);
    if (!server.ok()) return server.status();
    cluster->addresses_.push_back((*server)->address());
    cluster->servers_.push_back(*std::move(server));
  }
  return cluster;
}

PsClientOptions InProcessCluster::ClientOptions(uint32_t worker_id) const {
  PsClientOptions options;
  options.servers = addresses_;
  options.placement = placement_;
  options.worker_id = worker_id;
  options.timeout = absl::Seconds(10);
  options.connect_timeout = absl::Seconds(10);
  return options;
}

PsClientOptions InProcessCluster::BoundedClientOptions(uint32_t worker_id, uint32_t tau) const {
  PsClientOptions options = ClientOptions(worker_id);
  options.consistency = proto::CONSISTENCY_BOUNDED;
  options.staleness = tau;
  options.lease = absl::Seconds(5);
  return options;
}

std::unique_ptr<PsClient> InProcessCluster::Connect(uint32_t worker_id) const {
  return Connect(ClientOptions(worker_id));
}

std::unique_ptr<PsClient> InProcessCluster::Connect(const PsClientOptions& options) const {
  auto client = PsClient::Connect(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

}  // namespace ps
