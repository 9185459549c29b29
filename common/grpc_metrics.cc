#include "common/grpc_metrics.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"

namespace ps {

namespace {

using grpc::experimental::InterceptionHookPoints;

constexpr absl::string_view kOwnPrefix = "/ps.proto.";

// "/ps.proto.ParameterServer/Push" -> "ParameterServer/Push"; other
// services keep their full name.
std::string MethodLabel(const char* method) {
  absl::string_view m = method == nullptr ? "" : method;
  if (absl::StartsWith(m, kOwnPrefix)) return std::string(m.substr(kOwnPrefix.size()));
  return std::string(absl::StripPrefix(m, "/"));
}

// Size of a received message, known for this project's services only. A
// server serves every call through gRPC's generic API (server/rpc/
// data_call_queue.h): its messages are raw bytes. A client calls
// ParameterServer through the generic stub (worker/client/grpc_transport.h),
// raw bytes too, and the other services through generated stubs, protobuf
// messages. Other services (health, reflection) are not counted.
int64_t ReceivedBytes(const char* method, void* message, bool server) {
  if (message == nullptr || method == nullptr) return -1;
  absl::string_view m = method;
  if (!absl::StartsWith(m, kOwnPrefix)) return -1;
  if (server || absl::StartsWith(m, "/ps.proto.ParameterServer/")) {
    return static_cast<int64_t>(static_cast<grpc::ByteBuffer*>(message)->Length());
  }
  return static_cast<int64_t>(static_cast<google::protobuf::MessageLite*>(message)->ByteSizeLong());
}

const std::vector<double>& LatencyBounds() {
  static const std::vector<double>* const bounds =
      new std::vector<double>(ExponentialBuckets(50e-6, 2, 20));  // 50 us .. 26 s
  return *bounds;
}

std::string CodeLabel(grpc::StatusCode code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int c = static_cast<int>(code);
  return c >= 0 && c <= 16 ? kNames[c] : absl::StrCat(c);
}

// One call, either side. Names differ by side.
struct Names {
  bool server;  // the server's side of calls (every message raw bytes)
  const char* handled;
  const char* handled_help;
  const char* received;
  const char* received_help;
  const char* sent;
  const char* sent_help;
  const char* seconds;
  const char* seconds_help;
};

constexpr Names kServerNames = {true,
                                "ps_grpc_server_handled_total",
                                "gRPC calls this process answered, by method and status code",
                                "ps_grpc_server_received_bytes_total",
                                "Request bytes received, by method",
                                "ps_grpc_server_sent_bytes_total",
                                "Response bytes sent, by method",
                                "ps_grpc_server_handling_seconds",
                                "Time from a call's start to its status, by method"};
constexpr Names kClientNames = {false,
                                "ps_grpc_client_handled_total",
                                "gRPC calls this process made, by method and status code",
                                "ps_grpc_client_received_bytes_total",
                                "Response bytes received, by method",
                                "ps_grpc_client_sent_bytes_total",
                                "Request bytes sent, by method",
                                "ps_grpc_client_call_seconds",
                                "Time from a call's start to its status, by method"};

class CallRecorder {
 public:
  CallRecorder(MetricsRegistry* registry, const Names& names, const char* method)
      : registry_(registry),
        names_(names),
        method_(method),
        label_(MethodLabel(method)),
        start_(absl::Now()) {}

  void Received(void* message) {
    const int64_t bytes = ReceivedBytes(method_, message, names_.server);
    if (bytes >= 0) {
      registry_->GetCounter(names_.received, names_.received_help, {{"method", label_}})
          .Add(static_cast<uint64_t>(bytes));
    }
  }
  void Sent(grpc::ByteBuffer* message) {
    if (message == nullptr) return;
    registry_->GetCounter(names_.sent, names_.sent_help, {{"method", label_}})
        .Add(message->Length());
  }
  void Finished(grpc::StatusCode code) {
    registry_
        ->GetCounter(names_.handled, names_.handled_help,
                     {{"method", label_}, {"code", CodeLabel(code)}})
        .Add();
    registry_
        ->GetHistogram(names_.seconds, names_.seconds_help, LatencyBounds(), {{"method", label_}})
        .Observe(absl::ToDoubleSeconds(absl::Now() - start_));
  }

 private:
  MetricsRegistry* const registry_;
  const Names& names_;
  const char* const method_;
  const std::string label_;
  const absl::Time start_;
};

class ServerInterceptor final : public grpc::experimental::Interceptor {
 public:
  ServerInterceptor(MetricsRegistry* registry, const char* method)
      : recorder_(registry, kServerNames, method) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      recorder_.Received(methods->GetRecvMessage());
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      recorder_.Sent(methods->GetSerializedSendMessage());
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      recorder_.Finished(methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  CallRecorder recorder_;
};

class ClientInterceptor final : public grpc::experimental::Interceptor {
 public:
  ClientInterceptor(MetricsRegistry* registry, const char* method)
      : recorder_(registry, kClientNames, method) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      recorder_.Sent(methods->GetSerializedSendMessage());
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      recorder_.Received(methods->GetRecvMessage());
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_STATUS)) {
      grpc::Status* status = methods->GetRecvStatus();
      recorder_.Finished(status != nullptr ? status->error_code() : grpc::StatusCode::UNKNOWN);
    }
    methods->Proceed();
  }

 private:
  CallRecorder recorder_;
};

class ServerFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit ServerFactory(MetricsRegistry* registry) : registry_(registry) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new ServerInterceptor(registry_, info->method());
  }

 private:
  MetricsRegistry* const registry_;
};

class ClientFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit ClientFactory(MetricsRegistry* registry) : registry_(registry) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new ClientInterceptor(registry_, info->method());
  }

 private:
  MetricsRegistry* const registry_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewServerMetricsInterceptors(
    MetricsRegistry* registry) {
  return std::make_unique<ServerFactory>(registry);
}

std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> NewClientMetricsInterceptors(
    MetricsRegistry* registry) {
  return std::make_unique<ClientFactory>(registry);
}

}  // namespace ps
