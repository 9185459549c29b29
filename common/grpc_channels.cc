#include "common/grpc_channels.h"

#include <atomic>
#include <vector>

#include "common/grpc_metrics.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace ps {

namespace {

std::atomic<MetricsRegistry*>& PeerCallRegistry() {
  static std::atomic<MetricsRegistry*> registry{nullptr};
  return registry;
}

}  // namespace

void RecordPeerCallsIn(MetricsRegistry* registry) { PeerCallRegistry().store(registry); }

std::shared_ptr<grpc::Channel> NewPeerChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, absl::ToInt64Milliseconds(kKeepaliveTime));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, absl::ToInt64Milliseconds(kKeepaliveTimeout));
  // Pings go on while data cannot be sent: that is when they are needed.
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  if (MetricsRegistry* registry = PeerCallRegistry().load(); registry != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> metrics;
    metrics.push_back(NewClientMetricsInterceptors(registry));
    return grpc::experimental::CreateCustomChannelWithInterceptors(
        address, grpc::InsecureChannelCredentials(), args, std::move(metrics));
  }
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

void AcceptPeerKeepalive(grpc::ServerBuilder* builder) {
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                              static_cast<int>(absl::ToInt64Milliseconds(kKeepaliveTime / 2)));
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
}

}  // namespace ps
