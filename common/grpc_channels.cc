#include "common/grpc_channels.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/grpc_metrics.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_interceptor.h"

namespace ps {

namespace {

std::atomic<MetricsRegistry*>& PeerCallRegistry() {
  static std::atomic<MetricsRegistry*> registry{nullptr};
  return registry;
}

absl::Mutex& DefaultSecurityMu() {
  static absl::Mutex* const mu = new absl::Mutex();
  return *mu;
}
PeerSecurity& DefaultSecurity() ABSL_EXCLUSIVE_LOCKS_REQUIRED(DefaultSecurityMu()) {
  static PeerSecurity* const security = new PeerSecurity();
  return *security;
}

// Adds `authorization: Bearer <token>` to every call of the channel.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* const header_;
};

class TokenInterceptors final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptors(const std::string& token) : header_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&header_);
  }

 private:
  const std::string header_;  // lives as long as the channel that owns the factory
};

}  // namespace

void RecordPeerCallsIn(MetricsRegistry* registry) { PeerCallRegistry().store(registry); }

void SetDefaultPeerSecurity(PeerSecurity security) {
  absl::MutexLock lock(&DefaultSecurityMu());
  DefaultSecurity() = std::move(security);
}

std::shared_ptr<grpc::Channel> NewPeerChannel(const std::string& address,
                                              const PeerSecurity* security) {
  PeerSecurity chosen;
  if (security != nullptr) {
    chosen = *security;
  } else {
    absl::MutexLock lock(&DefaultSecurityMu());
    chosen = DefaultSecurity();
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      chosen.credentials != nullptr ? chosen.credentials : grpc::InsecureChannelCredentials();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, absl::ToInt64Milliseconds(kKeepaliveTime));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, absl::ToInt64Milliseconds(kKeepaliveTimeout));
  // Pings go on while data cannot be sent: that is when they are needed.
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Peers restart (a server killed and started again at its address):
  // reconnect within a second of it being back, not after gRPC's default
  // backoff of up to two minutes, which a replica link would take for a
  // successor that does not answer. (The minimum, which is also how long
  // one connection attempt may take, stays gRPC's 20 s.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (!chosen.token.empty())
    interceptors.push_back(std::make_unique<TokenInterceptors>(chosen.token));
  if (MetricsRegistry* registry = PeerCallRegistry().load(); registry != nullptr) {
    interceptors.push_back(NewClientMetricsInterceptors(registry));
  }
  if (interceptors.empty()) return grpc::CreateCustomChannel(address, credentials, args);
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, credentials, args,
                                                                 std::move(interceptors));
}

void AcceptPeerKeepalive(grpc::ServerBuilder* builder) {
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                              static_cast<int>(absl::ToInt64Milliseconds(kKeepaliveTime / 2)));
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
}

}  // namespace ps
