// The one place where absl::Status and grpc::Status are converted.
// Codes map one to one (both follow google.rpc.Code); messages are kept.
#ifndef PS_COMMON_GRPC_STATUS_H_
#define PS_COMMON_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace ps {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace ps

#endif  // PS_COMMON_GRPC_STATUS_H_
