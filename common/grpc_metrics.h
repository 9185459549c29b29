// Metrics of every gRPC call a process serves or makes, recorded by gRPC
// interceptors into a MetricsRegistry (common/metrics.h), per method
// ("ParameterServer/Push", "PsReplication/Forward", ...):
//   ps_grpc_server_handled_total{method,code}   calls answered, by status code
//   ps_grpc_server_received_bytes_total{method} request bytes (this project's services)
//   ps_grpc_server_sent_bytes_total{method}     response bytes
//   ps_grpc_server_handling_seconds{method}     histogram: call start to status sent
// and the same as a client: ps_grpc_client_handled_total{method,code},
// ps_grpc_client_sent_bytes_total, ps_grpc_client_received_bytes_total,
// ps_grpc_client_call_seconds.
//
// Installed only when a process serves metrics (--metrics_port): the
// interceptors cost a few allocations and lookups per call.
#ifndef PS_COMMON_GRPC_METRICS_H_
#define PS_COMMON_GRPC_METRICS_H_

#include <memory>

#include "common/metrics.h"
#include "grpcpp/support/client_interceptor.h"
#include "grpcpp/support/server_interceptor.h"

namespace ps {

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewServerMetricsInterceptors(
    MetricsRegistry* registry);

std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> NewClientMetricsInterceptors(
    MetricsRegistry* registry);

}  // namespace ps

#endif  // PS_COMMON_GRPC_METRICS_H_
